package webhook

import (
	"context"
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
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
	slots   *semaphore.Weighted
	waiting prometheus.Gauge // may be nil
}

func newHeavyLane(width int) *heavyLane {
	return &heavyLane{slots: semaphore.NewWeighted(int64(width))}
}

// enter waits for a slot when work is heavy and returns the function that
// frees it; light work passes at once. It gives up when ctx ends.
func (l *heavyLane) enter(ctx context.Context, work int) (func(), error) {
	if l == nil || work <= HeavyWork {
		return func() {}, nil
	}
	return l.acquire(ctx)
}

// acquire waits for a slot and returns the function that frees it. It
// gives up when ctx ends.
func (l *heavyLane) acquire(ctx context.Context) (func(), error) {
	if l.waiting != nil {
		l.waiting.Inc()
		defer l.waiting.Dec()
	}
	if err := l.slots.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("dsguard is busy judging other large placements and the request ended first: %w", err)
	}
	return func() { l.slots.Release(1) }, nil
}

// LargeReviewBytes is the request size above which a review takes the heavy
// lane once its body has arrived, before it is decoded. Decoding is most of
// the cost of a large review (a 1.5 MB one takes tens of milliseconds of CPU
// before any rule runs), so a flood of them must queue before decoding, not
// after. An ordinary DaemonSet review, old object and managed fields
// included, is tens of kilobytes.
const LargeReviewBytes = 256 << 10

type laneKey struct{}

// laneUse tells the handler which heavy lane the server shares with it, and
// whether this request already holds a slot (taken for its large body).
type laneUse struct {
	lane *heavyLane
	held bool
}

// laneFor returns the lane a handler's heavy evaluation should enter: the
// server's, unless the request already holds one of its slots (nil then,
// which enter passes at once), or fallback outside such a server.
func laneFor(ctx context.Context, fallback *heavyLane) *heavyLane {
	use, ok := ctx.Value(laneKey{}).(*laneUse)
	switch {
	case !ok:
		return fallback
	case use.held:
		return nil
	default:
		return use.lane
	}
}
