package webhook

import (
	"context"
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// HeavyWork is the prediction work (requirements × node decisions) above
// which an evaluation takes the heavy lane. Ordinary DaemonSets cost a few
// hundred units; the most a placement may cost is policy.MaxPredictionWork.
const HeavyWork = 20_000

// heavyLaneWidth leaves at least one core to ordinary requests.
func heavyLaneWidth() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// heavyLane bounds how many large evaluations run at once. A worst-case
// placement costs up to about 100 ms of CPU; eight clients sending them in
// a loop (dry-runs are free for them) would otherwise occupy every core, and
// a compliant DaemonSet's review would wait behind them.
type heavyLane struct {
	slots   chan struct{}
	waiting prometheus.Gauge // may be nil
}

func newHeavyLane(width int) *heavyLane {
	return &heavyLane{slots: make(chan struct{}, width)}
}

// enter waits for a slot when work is heavy and returns the function that
// frees it; light work passes at once. It gives up when ctx ends.
func (l *heavyLane) enter(ctx context.Context, work int) (func(), error) {
	if l == nil || work <= HeavyWork {
		return func() {}, nil
	}
	if l.waiting != nil {
		l.waiting.Inc()
		defer l.waiting.Dec()
	}
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("dsguard is busy judging other large placements and the request ended first: %w", ctx.Err())
	}
}
