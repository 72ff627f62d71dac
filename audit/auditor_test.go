package audit

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

func TestGaps_IgnoreTransientTaintsAndSelectors(t *testing.T) {
	infra := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	cov := &coverage.Coverage{Total: 6, Eligible: 1, Skips: []coverage.Skip{
		coverage.Skip{Kind: coverage.SkipTaint, Taint: infra}.WithNodes("infra-1", "infra-2"),
		coverage.Skip{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}, Transient: true}.WithNodes("joining-1"),
		coverage.Skip{Kind: coverage.SkipSelector}.WithNodes("gpu-1"),
		coverage.Skip{Kind: coverage.SkipOSArch}.WithNodes("win-1"),
	}}
	before := []coverage.Skip{coverage.Skip{Kind: coverage.SkipTaint, Taint: infra}.WithNodes("infra-1")}
	count, first := coverage.NewlySkipped(before, cov.Gaps(), newlySkippedNamed)
	if d := describeNewlySkipped(count, first, cov.Gaps()); d != "infra-2 (taint dedicated=infra:NoSchedule not tolerated)" {
		t.Errorf("description = %q, want infra-2 only: joining, selected-out and other-OS nodes are no gap", d)
	}
	if count, _ := coverage.NewlySkipped(cov.Gaps(), before, newlySkippedNamed); count != 0 {
		t.Error("fewer skipped nodes is not a reduction of coverage")
	}
}

func TestDescribeNewlySkipped_NamesTenWithTheirReasons(t *testing.T) {
	var gpus []string
	for i := range 12 {
		gpus = append(gpus, fmt.Sprintf("gpu-%02d", i))
	}
	infra := coverage.Skip{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}.WithNodes("infra-1")
	cov := &coverage.Coverage{Skips: []coverage.Skip{infra,
		coverage.Skip{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}.WithNodes(gpus...),
	}}
	count, first := coverage.NewlySkipped([]coverage.Skip{infra}, cov.Gaps(), newlySkippedNamed)
	got := describeNewlySkipped(count, first, cov.Gaps())
	if !strings.HasPrefix(got, "gpu-00 (taint nvidia.com/gpu:NoSchedule not tolerated), ") ||
		!strings.HasSuffix(got, "gpu-09 (taint nvidia.com/gpu:NoSchedule not tolerated), and 2 more") || strings.Contains(got, "infra-1") {
		t.Errorf("description = %q", got)
	}
}

// TestAuditor_QuietFirstPass: a new leader records the state of the
// DaemonSets it finds without Events; changes after that fire as before,
// and a DaemonSet first seen after the election still warns about its gap.
func TestAuditor_QuietFirstPass(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	nodes := coverage.NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-2"}},
	})
	recorder := events.NewFakeRecorder(10)
	a := &Auditor{Recorder: recorder, seen: map[types.NamespacedName]*auditMemory{}}
	audit := func(ds *appsv1.DaemonSet, quiet bool) []string {
		e := Run(Input{DaemonSets: []*appsv1.DaemonSet{ds}, Nodes: nodes, Policy: rules.Builtin().Default(), Now: now})[0]
		a.observe(t.Context(), &e, nodes, quiet)
		var got []string
		for len(recorder.Events) > 0 {
			got = append(got, <-recorder.Events)
		}
		return got
	}
	all := corev1.Toleration{Operator: corev1.TolerationOpExists}
	if got := audit(auditDS("inherited", 2, 1, all), true); len(got) != 0 {
		t.Errorf("first pass after election: Events %q, want none", got)
	}
	if got := audit(auditDS("inherited", 2, 1, all), false); len(got) != 0 {
		t.Errorf("unchanged gap: Events %q, want none", got)
	}
	if got := audit(auditDS("inherited", 2, 2, all), false); len(got) != 1 || !strings.Contains(got[0], "CoverageRestored") {
		t.Errorf("gap closed: Events %q, want one CoverageRestored", got)
	}
	if got := audit(auditDS("new", 2, 1, all), false); len(got) != 1 || !strings.Contains(got[0], "CoverageGap") {
		t.Errorf("a DaemonSet first seen later with a gap: Events %q, want one CoverageGap", got)
	}
}

// TestAuditor_LeavesTheDaemonSetAlone: the auditor reads each DaemonSet from
// the informer cache without a deep copy, so nothing an audit does with it
// (judging, the gap clock, Events, gauges, the investigation of a gap, the
// Report) may change it: a change would be the cache's.
func TestAuditor_LeavesTheDaemonSetAlone(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	nodes := coverage.NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "cp-1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"pool": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-2", Labels: map[string]string{"pool": "a"}}},
	})
	ds := auditDS("gappy", 3, 1) // skips cp-1, one Pod ready of three
	ds.Annotations = map[string]string{
		policy.ExemptionAnnotationPrefix + "readiness-probe": "later; expires=2026-12-31",
		policy.IntendedCoverageAnnotation:                    "",
	}
	ds.Spec.Template.Spec.Containers[0].Image = "example/agent:latest"
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpExists}}}}}}}
	before := ds.DeepCopy()

	recorder := events.NewFakeRecorder(100)
	a := &Auditor{Recorder: recorder, Metrics: NewMetrics(prometheus.NewRegistry()), Reports: &ReportWriter{},
		Pods: fake.NewClientBuilder().Build(), seen: map[types.NamespacedName]*auditMemory{}, gapClock: GapClock{}}
	// A gap, and the same gap past the window.
	for i := range 2 {
		at := now.Add(time.Duration(i) * 10 * time.Minute)
		a.gapClock.Track(ds, at)
		e := Run(Input{DaemonSets: []*appsv1.DaemonSet{ds}, Nodes: nodes, Policy: rules.Builtin().Default(), Now: at,
			GapSince: a.gapClock, Window: 5 * time.Minute})[0]
		a.observe(t.Context(), &e, nodes, false)
		a.record(&e)
		a.Reports.Set(&e)
	}
	var got []string
	for len(recorder.Events) > 0 {
		got = append(got, strings.Fields(<-recorder.Events)[1])
	}
	if want := []string{"Exempted", "CoverageGap", "PolicyViolation", "PersistentGap"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Events %q, want %q: the audit did not take the paths this test is for", got, want)
	}
	if !reflect.DeepEqual(ds, before) {
		t.Errorf("the audit changed the DaemonSet:\nbefore %+v\nafter  %+v", before, ds)
	}
}
