package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/policy/rules"
)

func auditDS(name string, desired, ready int32, tolerations ...corev1.Toleration) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "monitoring", Generation: 1},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: desired, CurrentNumberScheduled: desired, NumberReady: ready,
			UpdatedNumberScheduled: desired, NumberAvailable: ready, ObservedGeneration: 1},
	}
	ds.Spec.Template.Spec.Tolerations = tolerations
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "agent", Image: "example/agent:v1",
		ReadinessProbe: &corev1.Probe{}}}
	return ds
}

func TestAudit_TableAndJSON(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	nodes := coverage.NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "cp-1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-2"}},
	})
	all := corev1.Toleration{Operator: corev1.TolerationOpExists}
	healthy := auditDS("healthy", 3, 3, all)
	gap := auditDS("gap", 3, 2, all)
	gap.Annotations = map[string]string{"exempt.dsguard.io/privileged": "the driver needs it; expires=2026-12-31"}
	taintGap := auditDS("taint-gap", 2, 2) // skips cp-1, yet its counters look perfect
	entries := Run(Input{
		DaemonSets: []*appsv1.DaemonSet{taintGap, healthy, gap}, Nodes: nodes, Policy: rules.Builtin().Default(), Now: now,
		GapSince: map[types.NamespacedName]time.Time{{Namespace: "monitoring", Name: "gap"}: now.Add(-10 * time.Minute)},
		Window:   5 * time.Minute,
	})
	if len(entries) != 3 || entries[0].DaemonSet.Name != "gap" || entries[2].DaemonSet.Name != "taint-gap" {
		t.Fatalf("entries not sorted by namespace/name: %v", entries)
	}
	if entries[0].Status.State != StatePersistentGap || !entries[0].HasGap() {
		t.Errorf("gap: %+v", entries[0].Status)
	}
	if entries[1].HasGap() || entries[2].Skipped != 1 || !entries[2].HasGap() {
		t.Errorf("healthy hasGap=%v, taint-gap skipped=%d hasGap=%v", entries[1].HasGap(), entries[2].Skipped, entries[2].HasGap())
	}
	entries[0].Investigation = []coverage.NodeDiagnosis{{Node: "worker-2", Pod: "gap-x", State: "Waiting", Reason: "container agent: CrashLoopBackOff"}}

	var table bytes.Buffer
	if err := WriteTable(&table, entries, true, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"NAMESPACE    NAME        DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   MISSCHEDULED   SKIPPED   EXEMPT       STATE           REASON",
		"monitoring   gap         3         3         2       3            2           0              0         privileged   PersistentGap   1 of 3 nodes without a ready Pod for 10m0s",
		"  exempt privileged until 2026-12-31: the driver needs it",
		"  node worker-2: pod gap-x Waiting: container agent: CrashLoopBackOff",
		"monitoring   taint-gap   2         2         2       2            2           0              1         -            TaintGap        1 nodes skipped for untolerated taints",
		"\nmonitoring/gap:\n  node worker-2: pod gap-x Waiting: container agent: CrashLoopBackOff\n  exempt privileged until 2026-12-31: the driver needs it\n",
		"\nmonitoring/taint-gap:\n",
		"  skips taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated (cp-1)",
		"  deny control-plane-toleration: no toleration for node-role.kubernetes.io/control-plane:NoSchedule: skips cp-1 (1 of 3 nodes)",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}

	var out bytes.Buffer
	if err := WriteJSON(&out, entries, true); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Kind  string
		Items []struct {
			Name      string
			State     string
			HasGap    bool
			Predicted struct{ Nodes, Eligible, Skipped int }
			Findings  []map[string]any
		}
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Kind != "AuditReport" || len(rep.Items) != 3 || rep.Items[2].Predicted.Skipped != 1 ||
		rep.Items[2].Predicted.Eligible != 2 || !rep.Items[2].HasGap || rep.Items[1].Findings == nil {
		t.Errorf("JSON report: %+v", rep)
	}
}

func TestGapClock_Observe(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	gap, ok := auditDS("gap", 3, 2), auditDS("ok", 3, 3)
	key := types.NamespacedName{Namespace: "monitoring", Name: "gap"}
	g := GapClock{}
	g.Observe([]*appsv1.DaemonSet{gap, ok}, t0)
	g.Observe([]*appsv1.DaemonSet{gap, ok}, t0.Add(time.Minute))
	if len(g) != 1 || !g[key].Equal(t0) {
		t.Fatalf("after two passes: %v, want only gap, first seen at t0", g)
	}
	gap.Status.NumberReady = 3
	g.Observe([]*appsv1.DaemonSet{gap}, t0.Add(2*time.Minute))
	if len(g) != 0 {
		t.Errorf("a closed gap must be forgotten: %v", g)
	}
	gap.Status.NumberReady = 1
	g.Observe([]*appsv1.DaemonSet{gap}, t0.Add(3*time.Minute))
	g.Observe(nil, t0.Add(4*time.Minute))
	if len(g) != 0 {
		t.Errorf("a DaemonSet that is gone must be forgotten: %v", g)
	}
}

// TestAudit_Fit: with the cluster's Pods the audit says, per DaemonSet,
// whether a new Pod lands on each node it covers, and the fit rules judge it;
// without them neither appears.
func TestAudit_Fit(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}}}
	db := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "apps"},
		Spec: corev1.PodSpec{NodeName: "worker-1", Priority: new(int32(1000)), Containers: []corev1.Container{{Name: "db",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi")}}}}}}
	b := fit.NewBuilder()
	b.AddNode(node)
	if err := b.AddPod(db); err != nil {
		t.Fatal(err)
	}
	cluster := b.Build()
	ds := auditDS("big", 1, 0, corev1.Toleration{Operator: corev1.TolerationOpExists})
	ds.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
	in := Input{DaemonSets: []*appsv1.DaemonSet{ds}, Nodes: coverage.NewNodeSnapshot([]*corev1.Node{node}),
		Policy: rules.Builtin().Default(), Now: time.Now()}

	without := Run(in)[0]
	if without.Fit != nil || hasRule(without, "resource-fit") || hasRule(without, "priority-class") {
		t.Fatalf("without the cluster's Pods: fit %+v, findings %+v", without.Fit, without.Findings)
	}
	in.Fit = cluster
	e := Run(in)[0]
	if e.Fit == nil || e.Fit.Covered() != 1 || e.Fit.Outcomes()[0].Kind != fit.DoesNotFit {
		t.Fatalf("fit %+v, want does-not-fit on worker-1", e.Fit)
	}
	if !hasRule(e, "resource-fit") || !hasRule(e, "priority-class") {
		t.Errorf("findings %+v, want resource-fit and priority-class", e.Findings)
	}
	var out bytes.Buffer
	if err := WriteJSON(&out, []Entry{e}, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"kind": "does-not-fit"`) {
		t.Errorf("the JSON audit lacks the fit outcome:\n%s", out.String())
	}
}

func hasRule(e Entry, id string) bool {
	for _, f := range e.Findings {
		if f.RuleID == id {
			return true
		}
	}
	return false
}
