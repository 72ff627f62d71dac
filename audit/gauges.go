package audit

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// The reasons of dsguard_daemonset_uncovered_nodes, the counters of
// dsguard_daemonset_status, and the states of dsguard_daemonset_state, in
// the order of a gaugeRecord's arrays.
var (
	uncoveredReasons = [...]string{"taint", "intended-taint", "transient-taint", "selector", "os-arch", "nodeName"}
	statusCounters   = [...]string{"desired", "current", "ready", "updated", "available", "misscheduled"}
	auditStates      = []StatusState{StateHealthy, StateRollingOut, StateAwaitingManualDelete,
		StateCoverageGap, StatePersistentGap, StateMisscheduled, StateNotObserved}
)

// gaugeRecord is what the per-DaemonSet gauges say about one DaemonSet.
type gaugeRecord struct {
	uncovered [len(uncoveredReasons)]int32
	eligible  int32
	counters  [len(statusCounters)]int32
	state     int // index into auditStates, -1 for none
}

// daemonSetGauges exports the per-DaemonSet gauges from one small record
// per DaemonSet, made into metrics only when Prometheus scrapes. A GaugeVec
// keeps a child per series, with its labels as protobuf pairs: 20 series
// and about 9 KB per DaemonSet, which at 5,000 DaemonSets was 55 MB of
// live heap that every garbage collection scanned; a record is under 100
// bytes.
type daemonSetGauges struct {
	uncovered, eligible, counters, state *prometheus.Desc

	mu      sync.RWMutex
	records map[types.NamespacedName]gaugeRecord
}

func newDaemonSetGauges() *daemonSetGauges {
	return &daemonSetGauges{
		uncovered: prometheus.NewDesc("dsguard_daemonset_uncovered_nodes",
			"Nodes a DaemonSet is predicted to skip, by reason (taint, intended-taint, transient-taint, selector, os-arch, nodeName).",
			[]string{"namespace", "daemonset", "reason"}, nil),
		eligible: prometheus.NewDesc("dsguard_daemonset_predicted_nodes",
			"Nodes a DaemonSet is predicted to run on (what desiredNumberScheduled will be).",
			[]string{"namespace", "daemonset"}, nil),
		counters: prometheus.NewDesc("dsguard_daemonset_status",
			"A DaemonSet's status counters (desired, current, ready, updated, available, misscheduled).",
			[]string{"namespace", "daemonset", "counter"}, nil),
		state: prometheus.NewDesc("dsguard_daemonset_state",
			"1 for the DaemonSet's current audit state, 0 for the others.",
			[]string{"namespace", "daemonset", "state"}, nil),
		records: map[types.NamespacedName]gaugeRecord{},
	}
}

func (g *daemonSetGauges) set(key types.NamespacedName, r gaugeRecord) {
	g.mu.Lock()
	g.records[key] = r
	g.mu.Unlock()
}

func (g *daemonSetGauges) forget(key types.NamespacedName) {
	g.mu.Lock()
	delete(g.records, key)
	g.mu.Unlock()
}

func (g *daemonSetGauges) reset() {
	g.mu.Lock()
	g.records = map[types.NamespacedName]gaugeRecord{}
	g.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (g *daemonSetGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.uncovered
	ch <- g.eligible
	ch <- g.counters
	ch <- g.state
}

// Collect implements prometheus.Collector.
func (g *daemonSetGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for key, r := range g.records {
		ns, name := key.Namespace, key.Name
		for i, reason := range uncoveredReasons {
			ch <- prometheus.MustNewConstMetric(g.uncovered, prometheus.GaugeValue, float64(r.uncovered[i]), ns, name, reason)
		}
		ch <- prometheus.MustNewConstMetric(g.eligible, prometheus.GaugeValue, float64(r.eligible), ns, name)
		for i, counter := range statusCounters {
			ch <- prometheus.MustNewConstMetric(g.counters, prometheus.GaugeValue, float64(r.counters[i]), ns, name, counter)
		}
		for i, s := range auditStates {
			v := 0.0
			if i == r.state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(g.state, prometheus.GaugeValue, v, ns, name, string(s))
		}
	}
}
