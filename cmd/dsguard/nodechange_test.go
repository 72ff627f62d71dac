package main

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
)

func TestApplyTaintAndLabel(t *testing.T) {
	base := func() *corev1.Node {
		return testobj.Node("infra-4", testobj.NodeLabels("pool", "infra"),
			testobj.NodeTaints(corev1.Taint{Key: "dedicated", Value: "old", Effect: corev1.TaintEffectNoSchedule}))
	}
	for _, tc := range []struct {
		apply     func(*corev1.Node, string, bool) error
		spec      string
		overwrite bool
		want      string // taints, or the pool label, after
		wantErr   string
	}{
		{applyTaint, "dedicated=infra:NoSchedule", true, "[dedicated=infra:NoSchedule]", ""},
		// kubectl refuses to replace a taint of the same key and effect
		// without --overwrite, even with the same value.
		{applyTaint, "dedicated=infra:NoSchedule", false, "", "already has a taint dedicated with effect NoSchedule, and --overwrite is false"},
		{applyTaint, "dedicated=old:NoSchedule", false, "", "--overwrite is false"},
		{applyTaint, "dedicated=infra:NoExecute", false, "[dedicated=old:NoSchedule dedicated=infra:NoExecute]", ""},
		{applyTaint, "gpu:NoExecute", false, "[dedicated=old:NoSchedule gpu:NoExecute]", ""},
		{applyTaint, "dedicated:NoSchedule-", false, "[]", ""},
		// The removal form with a value, which kubectl accepts and whose
		// value it ignores.
		{applyTaint, "dedicated=old:NoSchedule-", false, "[]", ""},
		{applyTaint, "dedicated=other:NoSchedule-", false, "[]", ""},
		{applyTaint, "dedicated=old:NoExecute-", false, "", `taint "dedicated=old:NoExecute-" not found`},
		{applyTaint, "dedicated-", false, "[]", ""},
		{applyTaint, "other-", false, "", `taint "other-" not found`},
		{applyTaint, "dedicated=infra:Sometimes", false, "", "is not NoSchedule, PreferNoSchedule or NoExecute"},
		{applyTaint, "dedicated=infra", false, "", "want KEY[=VALUE]:EFFECT"},
		{applyLabel, "pool=gpu", true, "gpu", ""},
		{applyLabel, "pool=gpu", false, "", `label "pool" already has a value (infra) on node infra-4, and --overwrite is false`},
		// The value it has already is no overwrite (kubectl agrees).
		{applyLabel, "pool=infra", false, "infra", ""},
		{applyLabel, "pool-", false, "", ""},
		{applyLabel, "zone-", false, "", `label "zone" not found`},
		{applyLabel, "pool", false, "", "want KEY=VALUE or KEY-"},
	} {
		t.Run(fmt.Sprintf("%s overwrite=%v", tc.spec, tc.overwrite), func(t *testing.T) {
			n := base()
			err := tc.apply(n, tc.spec, tc.overwrite)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if strings.Contains(tc.spec, ":") || strings.HasPrefix(tc.spec, "dedicated") {
				var parts []string
				for _, t := range n.Spec.Taints {
					parts = append(parts, t.ToString())
				}
				got = "[" + strings.Join(parts, " ") + "]"
			} else {
				got = n.Labels["pool"]
			}
			if got != tc.want {
				t.Errorf("after %s: %q, want %q", tc.spec, got, tc.want)
			}
		})
	}
}

func TestJudgeNodeChange(t *testing.T) {
	before := testobj.Node("infra-4", testobj.NodeLabels("pool", "infra"))
	after := before.DeepCopy()
	if err := applyTaint(after, "dedicated=infra:NoSchedule", false); err != nil {
		t.Fatal(err)
	}
	named := func(name string, mutators ...func(*appsv1.DaemonSet)) appsv1.DaemonSet {
		ds := testobj.DS(mutators...)
		ds.Name = name
		return *ds
	}
	dss := []appsv1.DaemonSet{
		named("istio-cni-node", testobj.WithTolerations()),
		named("node-exporter"), // tolerates everything
		named("csi-plugin", testobj.WithTolerations()),
	}
	pod := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "istio-cni-node-x", Namespace: "monitoring",
		OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "istio-cni-node", Controller: new(true)}}}}
	r := judgeNodeChange(before, after, dss, []metav1.PartialObjectMetadata{pod})
	if r.Unaffected != 1 || len(r.DaemonSets) != 2 || r.Loses() != 2 {
		t.Fatalf("report %+v, want csi-plugin and istio-cni-node losing the node, node-exporter unaffected", r)
	}
	want := []struct {
		name   string
		impact coverage.Impact
		why    string
	}{
		{"csi-plugin", coverage.ImpactNoLongerPlaced, "taint dedicated=infra:NoSchedule not tolerated: no Pod will be made on infra-4"},
		{"istio-cni-node", coverage.ImpactLostOnRestart, "taint dedicated=infra:NoSchedule not tolerated: its Pod keeps running until it is restarted, evicted or updated, then never comes back on infra-4"},
	}
	for i, w := range want {
		if d := r.DaemonSets[i]; d.Name != w.name || d.Impact != w.impact || d.Why != w.why {
			t.Errorf("DaemonSet %d: %+v, want %+v", i, d, w)
		}
	}
	var out strings.Builder
	if err := r.write(&out, "taints"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "DaemonSets losing infra-4: 2, gaining it: 0, unaffected: 1") {
		t.Errorf("output:\n%s", out.String())
	}
}
