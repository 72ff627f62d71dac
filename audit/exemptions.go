package audit

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dsguard/dsguard/policy"
)

// Exemptions are visible wherever an operator looks: an exemption is a
// decision someone took to let a deny through, and it ends on the date it
// names. The audit lists them per DaemonSet (the EXEMPT column, the JSON
// report, the OpenReports result of the exempted rule), the auditor raises an
// Exempted Event when a DaemonSet's exemptions change, and the gauge
// dsguard_exemptions_active counts them by rule and namespace, apart from
// the findings.

// exemptColumn is the EXEMPT column: the exempted rules, "-" for none.
func exemptColumn(es []policy.ActiveExemption) string {
	if len(es) == 0 {
		return "-"
	}
	rules := make([]string, len(es))
	for i, e := range es {
		rules[i] = e.Rule
	}
	return strings.Join(rules, ",")
}

// describeExemptions is one line for an Event, "" for none.
func describeExemptions(es []policy.ActiveExemption) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.String()
	}
	return strings.Join(parts, "; ")
}

// exemptionTally keeps dsguard_exemptions_active{rule,namespace} equal to the
// active exemptions of the DaemonSets the auditor knows.
type exemptionTally struct {
	gauge *prometheus.GaugeVec // nil: no metrics
	byDS  map[types.NamespacedName][]string
}

func (t *exemptionTally) set(key types.NamespacedName, es []policy.ActiveExemption) {
	if t.byDS == nil {
		t.byDS = map[types.NamespacedName][]string{}
	}
	for _, r := range t.byDS[key] {
		t.add(r, key.Namespace, -1)
	}
	rules := make([]string, len(es))
	for i, e := range es {
		rules[i] = e.Rule
		t.add(e.Rule, key.Namespace, 1)
	}
	if len(rules) == 0 {
		delete(t.byDS, key)
		return
	}
	t.byDS[key] = rules
}

func (t *exemptionTally) forget(key types.NamespacedName) { t.set(key, nil) }

func (t *exemptionTally) add(rule, namespace string, d float64) {
	if t.gauge != nil {
		t.gauge.WithLabelValues(rule, namespace).Add(d)
	}
}

// newExemptionsGauge is dsguard_exemptions_active.
func newExemptionsGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dsguard_exemptions_active",
		Help: "DaemonSets with an exemption that takes effect, by exempted rule and namespace (apart from the findings: an exempted finding is recorded at audit level).",
	}, []string{"rule", "namespace"})
}

// observeExemptions raises an Exempted Event when the DaemonSet's active
// exemptions change to a non-empty set, and keeps the gauge current.
func (a *Auditor) observeExemptions(e *Entry, mem *auditMemory, quiet bool) {
	a.exemptions.set(e.Key(), e.Exemptions)
	now := describeExemptions(e.Exemptions)
	if now != mem.exemptions && now != "" && !quiet {
		a.event(e.DaemonSet, corev1.EventTypeNormal, "Exempted", "exempted from %s", now)
	}
	mem.exemptions = now
}
