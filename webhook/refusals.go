package webhook

import (
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// Reasons dsguard's own server refuses, cuts off or drops a request or
// connection: the values of dsguard_webhook_refusals_total's reason label.
// A refusal of the API server's request opens its failurePolicy (admitted
// unjudged on the fail-open entries), so every one is counted and logged.
const (
	// RefusedConnectionEvicted: a connection closed at the connection cap.
	RefusedConnectionEvicted = "connection-evicted"
	// RefusedSlowBody: a body that did not arrive at the pace the API
	// server sends one (see ServerOptions.MinBodyRate).
	RefusedSlowBody = "slow-body"
	// RefusedBodyBudget: a body over LargeReviewBytes that found no room
	// in its caller's share of the large-body budget.
	RefusedBodyBudget = "body-budget"
	// RefusedLaneTimeout: a large review that waited its whole allowance
	// for the heavy lane.
	RefusedLaneTimeout = "lane-timeout"
	// RefusedLaneEvicted: a large review dropped from the full queue of the
	// heavy lane to make room for another caller's.
	RefusedLaneEvicted = "lane-evicted"
	// RefusedLaneFull: the heavy lane's queue is full of the API server's
	// requests, and the caller is not the API server.
	RefusedLaneFull = "lane-full"
	// RefusedEntryBusy: a review of an entry judged a few at a time (the
	// Node entry, Server.RegisterLimited) that found no turn in time.
	RefusedEntryBusy = "entry-busy"
)

// Callers of dsguard_webhook_refusals_total's caller label.
const (
	// CallerAPIServer: a verified client certificate with an expected identity.
	CallerAPIServer = "api-server"
	// CallerAPIServerAddress: client authentication is off and the
	// caller's source is one of the API server's addresses.
	CallerAPIServerAddress = "api-server-address"
	// CallerUnauthenticated: client authentication is on and the caller
	// did not pass it: not the API server.
	CallerUnauthenticated = "unauthenticated"
	// CallerUnknown: client authentication is off; the caller may be the
	// API server or anyone who reaches the port.
	CallerUnknown = "unknown"
)

// refusals counts and logs the server's refusals: every one in the metric,
// at most one log line per reason per interval with the count of the rest,
// so that a flood costs a line every few seconds.
type refusals struct {
	metric     *prometheus.CounterVec // may be nil
	log        logr.Logger
	clientAuth bool
	interval   time.Duration

	mu   sync.Mutex
	last map[string]time.Time
	hush map[string]int
}

func newRefusals(metric *prometheus.CounterVec, log logr.Logger, clientAuth bool) *refusals {
	return &refusals{metric: metric, log: log, clientAuth: clientAuth, interval: 10 * time.Second,
		last: map[string]time.Time{}, hush: map[string]int{}}
}

// caller names p for the caller label.
func (r *refusals) caller(p peer) string {
	switch {
	case p.trusted && p.byAddress:
		return CallerAPIServerAddress
	case p.trusted:
		return CallerAPIServer
	case r.clientAuth:
		return CallerUnauthenticated
	default:
		return CallerUnknown
	}
}

// add counts one refusal of p's request or connection for reason.
func (r *refusals) add(reason string, p peer) {
	if r == nil {
		return
	}
	caller := r.caller(p)
	if r.metric != nil {
		r.metric.WithLabelValues(reason, caller).Inc()
	}
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.last[reason]) < r.interval {
		r.hush[reason]++
		r.mu.Unlock()
		return
	}
	r.last[reason] = now
	suppressed := r.hush[reason]
	r.hush[reason] = 0
	r.mu.Unlock()
	r.log.Info("refused a request or connection: dsguard_webhook_refusals_total counts every one",
		"reason", reason, "caller", caller, "source", p.key, "similarSinceLastLine", suppressed)
}
