package audit

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/coverage"
)

func TestCountedGaps_IgnoreTransientTaintsAndSelectors(t *testing.T) {
	cov := &coverage.Coverage{Total: 6, Eligible: 1, Skips: []coverage.Skip{
		{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}, Nodes: []string{"infra-1", "infra-2"}},
		{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}, Transient: true, Nodes: []string{"joining-1"}},
		{Kind: coverage.SkipSelector, Nodes: []string{"gpu-1"}},
		{Kind: coverage.SkipOSArch, Nodes: []string{"win-1"}},
	}}
	got := countedGaps(cov)
	if len(got) != 2 || got["infra-1"] == "" || got["infra-2"] == "" {
		t.Fatalf("counted gaps = %v, want infra-1 and infra-2 only", got)
	}
	added := newlySkipped(map[string]string{"infra-1": "x"}, got)
	if !reflect.DeepEqual(added, []string{"infra-2"}) {
		t.Errorf("newly skipped = %v, want [infra-2]", added)
	}
	if d := describeNewlySkipped(added, got); d != "infra-2 (taint dedicated=infra:NoSchedule not tolerated)" {
		t.Errorf("description = %q", d)
	}
	if len(newlySkipped(got, map[string]string{"infra-1": "x"})) != 0 {
		t.Error("fewer skipped nodes is not a reduction of coverage")
	}
}
