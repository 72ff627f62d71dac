package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are dsguard's own Prometheus collectors. controller-runtime adds
// its webhook latency and in-flight metrics on the same registry. Labels are
// bounded: rule IDs and actions, never object or node names.
type Metrics struct {
	Decisions *prometheus.CounterVec
	// NodeChangeDecisions counts the Node entry's answers.
	NodeChangeDecisions *prometheus.CounterVec
	Findings            *prometheus.CounterVec
	Bypasses            prometheus.Counter
	// ConnectionsEvicted counts connections closed at the connection cap.
	ConnectionsEvicted prometheus.Counter
	// MetricsConnectionsEvicted counts connections to the metrics port
	// closed at its cap.
	MetricsConnectionsEvicted prometheus.Counter
	// HeavyWaiting is the number of large reviews waiting for the heavy lane.
	HeavyWaiting prometheus.Gauge
	// Refusals counts requests and connections the webhook server refused,
	// cut off or dropped, by reason and caller.
	Refusals *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dsguard_admission_decisions_total",
			Help: "Admission decisions on DaemonSets by result: allowed, warned, denied, skipped, error (dsguard failed), invalid (a request no API server sends), unauthenticated (a caller without a client certificate naming an expected identity, when client authentication is on), unverified (client authentication is off and the review came from outside the API server's addresses, after the API server was seen calling from them), abandoned (the caller went away before the answer), refused (refused as busy; see dsguard_webhook_refusals_total).",
		}, []string{"result"}),
		Findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dsguard_findings_total",
			Help: "Findings reported at admission, by rule and final action.",
		}, []string{"rule", "action"}),
		NodeChangeDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dsguard_node_change_decisions_total",
			Help: "Answers to changes of Node taints and labels by people (the Node webhook entry), by result: allowed (no DaemonSet loses the node), warned, denied (an agent the policy says no node may lose), bypassed, unjudged (past the bounds of one review: too many taints or labels, or out of time; admitted with a warning), unauthenticated, unverified (judged, but from outside the API server's addresses; see dsguard_admission_decisions_total), invalid (a review no API server sends: another kind, an object that does not decode), error (dsguard failed).",
		}, []string{"result"}),
		Bypasses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dsguard_bypass_total",
			Help: "DaemonSet requests admitted unchecked because the user or a group is on the policy's bypass list.",
		}),
	}
	m.ConnectionsEvicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dsguard_webhook_connections_evicted_total",
		Help: "Connections to the webhook port closed at the connection cap (--max-connections) before they delivered a whole request: a sign of slow or abusive clients.",
	})
	m.MetricsConnectionsEvicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dsguard_metrics_connections_evicted_total",
		Help: "Connections to the metrics port closed at its connection cap (--metrics-max-connections): a client holding connections open there.",
	})
	m.HeavyWaiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dsguard_heavy_evaluations_waiting",
		Help: "DaemonSet reviews with a large placement or a body over 256 KiB waiting for their turn: large reviews are decoded and judged a few at a time, so that they never delay ordinary ones.",
	})
	m.Refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dsguard_webhook_refusals_total",
		Help: "Requests and connections the webhook server refused, cut off or dropped, by reason (connection-evicted, slow-body, body-budget, lane-timeout, lane-evicted, lane-full, entry-busy: a Node review that found no turn in the Node entry's own lane) and caller (api-server: authenticated; unauthenticated: client authentication is on and the caller failed it; api-server-address: client authentication is off and the caller's source is one of the API server's addresses, --api-server-addresses; unknown: client authentication is off, from any other source). A refused review of the API server's is admitted unjudged on a fail-open webhook entry.",
	}, []string{"reason", "caller"})
	reg.MustRegister(m.Decisions, m.NodeChangeDecisions, m.Findings, m.Bypasses, m.ConnectionsEvicted, m.MetricsConnectionsEvicted, m.HeavyWaiting, m.Refusals)
	return m
}
