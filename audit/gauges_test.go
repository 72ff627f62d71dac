package audit

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// TestAuditor_DaemonSetGauges reads the per-DaemonSet gauges as Prometheus
// scrapes them: skipped nodes by each reason, the predicted nodes, the
// status counters and one state at 1, for every audited DaemonSet; a
// forgotten DaemonSet's series gone, and none after the term ends.
func TestAuditor_DaemonSetGauges(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	taint := func(key string) []corev1.Taint {
		return []corev1.Taint{{Key: key, Effect: corev1.TaintEffectNoSchedule}}
	}
	nodes := coverage.NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "cp-1"}, Spec: corev1.NodeSpec{Taints: taint("node-role.kubernetes.io/control-plane")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "joining-1", Labels: map[string]string{"pool": "a"}},
			Spec: corev1.NodeSpec{Taints: taint("node.kubernetes.io/not-ready")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"pool": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-2", Labels: map[string]string{"pool": "b"}}},
	})
	all := corev1.Toleration{Operator: corev1.TolerationOpExists}
	taintGap := auditDS("taint-gap", 2, 2) // skips cp-1 (taint) and joining-1 (transient taint)
	intended := auditDS("intended", 2, 2)
	intended.Annotations = map[string]string{policy.IntendedCoverageAnnotation: "not on the control plane"}
	intended.Status.UpdatedNumberScheduled = 1 // rolling out
	poolA := auditDS("pool-a", 2, 1, all)      // selects worker-1 and joining-1
	poolA.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a"}
	// Counters that differ, here and in intended's rollout: one read from
	// the wrong field shows.
	poolA.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 6, CurrentNumberScheduled: 5, NumberReady: 4,
		NumberAvailable: 3, UpdatedNumberScheduled: 6, ObservedGeneration: 1}
	m := NewMetrics(prometheus.NewRegistry())
	a := &Auditor{Metrics: m}
	for _, e := range Run(Input{DaemonSets: []*appsv1.DaemonSet{taintGap, intended, poolA}, Nodes: nodes,
		Policy: rules.Builtin().Default(), Now: now}) {
		a.record(&e)
	}
	want := `
# HELP dsguard_daemonset_uncovered_nodes Nodes a DaemonSet is predicted to skip, by reason (taint, intended-taint, transient-taint, selector, os-arch, nodeName).
# TYPE dsguard_daemonset_uncovered_nodes gauge
dsguard_daemonset_uncovered_nodes{daemonset="intended",namespace="monitoring",reason="intended-taint"} 1
dsguard_daemonset_uncovered_nodes{daemonset="intended",namespace="monitoring",reason="nodeName"} 0
dsguard_daemonset_uncovered_nodes{daemonset="intended",namespace="monitoring",reason="os-arch"} 0
dsguard_daemonset_uncovered_nodes{daemonset="intended",namespace="monitoring",reason="selector"} 0
dsguard_daemonset_uncovered_nodes{daemonset="intended",namespace="monitoring",reason="taint"} 0
dsguard_daemonset_uncovered_nodes{daemonset="intended",namespace="monitoring",reason="transient-taint"} 1
dsguard_daemonset_uncovered_nodes{daemonset="pool-a",namespace="monitoring",reason="intended-taint"} 0
dsguard_daemonset_uncovered_nodes{daemonset="pool-a",namespace="monitoring",reason="nodeName"} 0
dsguard_daemonset_uncovered_nodes{daemonset="pool-a",namespace="monitoring",reason="os-arch"} 0
dsguard_daemonset_uncovered_nodes{daemonset="pool-a",namespace="monitoring",reason="selector"} 2
dsguard_daemonset_uncovered_nodes{daemonset="pool-a",namespace="monitoring",reason="taint"} 0
dsguard_daemonset_uncovered_nodes{daemonset="pool-a",namespace="monitoring",reason="transient-taint"} 0
dsguard_daemonset_uncovered_nodes{daemonset="taint-gap",namespace="monitoring",reason="intended-taint"} 0
dsguard_daemonset_uncovered_nodes{daemonset="taint-gap",namespace="monitoring",reason="nodeName"} 0
dsguard_daemonset_uncovered_nodes{daemonset="taint-gap",namespace="monitoring",reason="os-arch"} 0
dsguard_daemonset_uncovered_nodes{daemonset="taint-gap",namespace="monitoring",reason="selector"} 0
dsguard_daemonset_uncovered_nodes{daemonset="taint-gap",namespace="monitoring",reason="taint"} 1
dsguard_daemonset_uncovered_nodes{daemonset="taint-gap",namespace="monitoring",reason="transient-taint"} 1
# HELP dsguard_daemonset_predicted_nodes Nodes a DaemonSet is predicted to run on (what desiredNumberScheduled will be).
# TYPE dsguard_daemonset_predicted_nodes gauge
dsguard_daemonset_predicted_nodes{daemonset="intended",namespace="monitoring"} 2
dsguard_daemonset_predicted_nodes{daemonset="pool-a",namespace="monitoring"} 2
dsguard_daemonset_predicted_nodes{daemonset="taint-gap",namespace="monitoring"} 2
# HELP dsguard_daemonset_status A DaemonSet's status counters (desired, current, ready, updated, available, misscheduled).
# TYPE dsguard_daemonset_status gauge
dsguard_daemonset_status{counter="available",daemonset="intended",namespace="monitoring"} 2
dsguard_daemonset_status{counter="current",daemonset="intended",namespace="monitoring"} 2
dsguard_daemonset_status{counter="desired",daemonset="intended",namespace="monitoring"} 2
dsguard_daemonset_status{counter="misscheduled",daemonset="intended",namespace="monitoring"} 0
dsguard_daemonset_status{counter="ready",daemonset="intended",namespace="monitoring"} 2
dsguard_daemonset_status{counter="updated",daemonset="intended",namespace="monitoring"} 1
dsguard_daemonset_status{counter="available",daemonset="pool-a",namespace="monitoring"} 3
dsguard_daemonset_status{counter="current",daemonset="pool-a",namespace="monitoring"} 5
dsguard_daemonset_status{counter="desired",daemonset="pool-a",namespace="monitoring"} 6
dsguard_daemonset_status{counter="misscheduled",daemonset="pool-a",namespace="monitoring"} 0
dsguard_daemonset_status{counter="ready",daemonset="pool-a",namespace="monitoring"} 4
dsguard_daemonset_status{counter="updated",daemonset="pool-a",namespace="monitoring"} 6
dsguard_daemonset_status{counter="available",daemonset="taint-gap",namespace="monitoring"} 2
dsguard_daemonset_status{counter="current",daemonset="taint-gap",namespace="monitoring"} 2
dsguard_daemonset_status{counter="desired",daemonset="taint-gap",namespace="monitoring"} 2
dsguard_daemonset_status{counter="misscheduled",daemonset="taint-gap",namespace="monitoring"} 0
dsguard_daemonset_status{counter="ready",daemonset="taint-gap",namespace="monitoring"} 2
dsguard_daemonset_status{counter="updated",daemonset="taint-gap",namespace="monitoring"} 2
`
	if err := testutil.CollectAndCompare(m.daemonSets, strings.NewReader(want), "dsguard_daemonset_uncovered_nodes",
		"dsguard_daemonset_predicted_nodes", "dsguard_daemonset_status"); err != nil {
		t.Error(err)
	}
	// Every state of each DaemonSet, one of them at 1.
	states, err := testutil.CollectAndFormat(m.daemonSets, expfmt.TypeTextPlain, "dsguard_daemonset_state")
	if err != nil {
		t.Fatal(err)
	}
	series, ones := 0, []string{}
	for _, line := range strings.Split(string(states), "\n") {
		if strings.HasPrefix(line, "dsguard_daemonset_state{") {
			series++
			if strings.HasSuffix(line, " 1") {
				ones = append(ones, line)
			}
		}
	}
	wantOnes := []string{
		`dsguard_daemonset_state{daemonset="intended",namespace="monitoring",state="RollingOut"} 1`,
		`dsguard_daemonset_state{daemonset="pool-a",namespace="monitoring",state="CoverageGap"} 1`,
		`dsguard_daemonset_state{daemonset="taint-gap",namespace="monitoring",state="Healthy"} 1`,
	}
	if series != 3*len(auditStates) || !slices.Equal(ones, wantOnes) {
		t.Errorf("%d state series, %q at 1; want %d, %q:\n%s", series, ones, 3*len(auditStates), wantOnes, states)
	}

	a.forget(types.NamespacedName{Namespace: "monitoring", Name: "pool-a"})
	if n := testutil.CollectAndCount(m.daemonSets); n != 2*(len(uncoveredReasons)+1+len(statusCounters)+len(auditStates)) {
		t.Errorf("%d series after pool-a was forgotten, want those of two DaemonSets", n)
	}
	a.endTerm()
	if n := testutil.CollectAndCount(m.daemonSets); n != 0 {
		t.Errorf("%d series after the term ended, want none", n)
	}
}
