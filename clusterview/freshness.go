package clusterview

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	toolscache "k8s.io/client-go/tools/cache"
)

// Defaults of Freshness.
const (
	DefaultStaleAfter    = 2 * time.Minute
	DefaultProbeInterval = 10 * time.Second
)

// Freshness tracks how long ago the node view was last known to match the
// API server: its age. A watch says nothing when nothing changes, so silence
// alone cannot tell a quiet cluster from a lost connection. Two signs count
// as contact: a node event (any event, and the relist after a reconnect) and
// a successful Probe while the node watch has reported no failure since its
// last event. A failed list or watch of nodes stops the probe from counting
// until the next event proves the reflector has caught up again.
type Freshness struct {
	// StaleAfter is the age past which the view is stale and node-aware
	// rules fall back to their offline form; DefaultStaleAfter when zero.
	StaleAfter time.Duration
	// Probe asks the API server something cheap (a list of one node). Nil:
	// only events count, and a quiet cluster looks stale.
	Probe func(context.Context) error
	// ProbeInterval is how often Probe runs; DefaultProbeInterval when zero.
	ProbeInterval time.Duration

	heard    atomic.Int64 // UnixNano of the last contact; 0 before the first sync
	broken   atomic.Bool  // a node list or watch failed since the last event
	reported atomic.Bool  // staleness has been logged
}

// Age returns how long ago the view was last known to match the API server;
// 0 before the first sync.
func (f *Freshness) Age() time.Duration {
	h := f.heard.Load()
	if h == 0 {
		return 0
	}
	return time.Since(time.Unix(0, h))
}

// StaleFor returns the view's age when it is past StaleAfter, else 0.
func (f *Freshness) StaleFor() time.Duration {
	if age := f.Age(); age > f.bound() {
		return age
	}
	return 0
}

// bound is StaleAfter, or DefaultStaleAfter when it is not set.
func (f *Freshness) bound() time.Duration {
	if f.StaleAfter <= 0 {
		return DefaultStaleAfter
	}
	return f.StaleAfter
}

// AgeCollector is the gauge dsguard_node_view_age_seconds.
func (f *Freshness) AgeCollector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dsguard_node_view_age_seconds",
		Help: "Seconds since the node view was last known to match the API server (a node event, or a successful probe while the node watch is healthy).",
	}, func() float64 { return f.Age().Seconds() })
}

// BoundCollector is the gauge dsguard_node_view_staleness_bound_seconds: the
// bound the age is judged by (--node-staleness-bound), so that the stale-view
// alert compares each replica's age with its own bound, whatever it is set to.
func (f *Freshness) BoundCollector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dsguard_node_view_staleness_bound_seconds",
		Help: "The node view's staleness bound (--node-staleness-bound): past it, node-aware rules judge without live nodes.",
	}, func() float64 { return f.bound().Seconds() })
}

// watchError is the node reflector's error handler: a failed node list or
// watch marks the view as out of touch; every error is then logged as
// client-go's default handler does.
func (v *NodeView) watchError(ctx context.Context, r *toolscache.Reflector, err error) {
	v.broken.Store(true)
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
}

func (f *Freshness) touch(t time.Time) { f.heard.Store(t.UnixNano()) }

// heardEvent counts a node event as contact once the view is built (until
// then Age stays 0, see Age): the reflector has caught up.
func (f *Freshness) heardEvent() {
	if f.heard.Load() == 0 {
		return
	}
	f.broken.Store(false)
	f.touch(time.Now())
}

// trackFreshness starts the clock (the view has just been built from a
// complete list of the nodes) and runs the probe until ctx ends; node events
// count through heardEvent.
func (v *NodeView) trackFreshness(ctx context.Context) {
	v.broken.Store(false)
	v.touch(time.Now())
	interval := v.ProbeInterval
	if interval <= 0 {
		interval = DefaultProbeInterval
	}
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if v.Probe != nil {
				start := time.Now()
				pctx, cancel := context.WithTimeout(ctx, interval)
				err := v.Probe(pctx)
				cancel()
				if err == nil && !v.broken.Load() {
					v.touch(start)
				}
			}
			v.logStaleness()
		}
	}()
}

func (v *NodeView) logStaleness() {
	if age := v.StaleFor(); age > 0 {
		if !v.reported.Swap(true) {
			v.Log.Info("node view is stale: the API server has not been heard from; node-aware rules fall back to their offline form",
				"age", age.Round(time.Second), "bound", v.StaleAfter)
		}
	} else if v.reported.Swap(false) {
		v.Log.Info("node view is fresh again", "age", v.Age().Round(time.Second))
	}
}
