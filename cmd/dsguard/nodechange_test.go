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
		// kubectl reads KEY=VALUE- as a key with "=" in it and refuses it.
		{applyTaint, "dedicated=old-", false, "", `taint "dedicated=old-": key "dedicated=old": name part must consist of`},
		{applyTaint, "dedicated:Sometimes-", false, "", `effect "Sometimes" is not NoSchedule, PreferNoSchedule or NoExecute`},
		{applyTaint, "dedicated:NoSchedule:NoExecute-", false, "", "want KEY[=VALUE]:EFFECT or KEY[:EFFECT]-"},
		{applyTaint, "dedicated=infra:Sometimes", false, "", "is not NoSchedule, PreferNoSchedule or NoExecute"},
		{applyTaint, "dedicated=infra", false, "", "want KEY[=VALUE]:EFFECT"},
		{applyLabel, "pool=gpu", true, "gpu", ""},
		{applyLabel, "pool=gpu", false, "", `label "pool" already has a value (infra) on node infra-4, and --overwrite is false`},
		{applyLabel, "pool=", false, "", `label "pool" already has a value (infra) on node infra-4, and --overwrite is false`},
		// The value it has already is no overwrite (kubectl agrees).
		{applyLabel, "pool=infra", false, "infra", ""},
		{applyLabel, "pool-", false, "", ""},
		{applyLabel, "zone-", false, "", `label "zone" not found`},
		{applyLabel, "pool", false, "", "want KEY=VALUE or KEY-"},
		// Keys and values the API server would refuse, refused with why.
		{applyTaint, "bad key!=x:NoSchedule", false, "", `key "bad key!": name part must consist of alphanumeric characters`},
		{applyTaint, "=x:NoSchedule", false, "", `key "": name part must be non-empty`},
		{applyTaint, "gpu=two words:NoSchedule", false, "", `value "two words": a valid label must be`},
		{applyLabel, "example.com/=x", false, "", `key "example.com/": name part must be non-empty`},
		{applyLabel, "pool=" + strings.Repeat("v", 64), false, "", "must be no more than 63 bytes"},
		{applyLabel, "example.com/pool=", false, "infra", ""}, // an empty value is valid; pool untouched
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

// TestApplyTaint_OneKeyTwoEffects: on a node with one key under two
// effects, each form of kubectl taint touches what kubectl's does: KEY:EFFECT-
// and KEY=VALUE:EFFECT- one effect (the value not matched), KEY- both; an
// added taint replaces only its own key and effect, and only with
// --overwrite, whether or not its value differs.
func TestApplyTaint_OneKeyTwoEffects(t *testing.T) {
	for _, tc := range []struct {
		spec      string
		overwrite bool
		want      string // the taints after
		wantErr   string
	}{
		{"dedicated:NoSchedule-", false, "[dedicated=old:NoExecute gpu:NoSchedule]", ""},
		{"dedicated=old:NoExecute-", false, "[dedicated=old:NoSchedule gpu:NoSchedule]", ""},
		{"dedicated=other:NoExecute-", false, "[dedicated=old:NoSchedule gpu:NoSchedule]", ""},
		{"dedicated-", false, "[gpu:NoSchedule]", ""},
		{"dedicated:PreferNoSchedule-", false, "", `taint "dedicated:PreferNoSchedule-" not found on node infra-4`},
		{"dedicated=new:NoExecute", false, "", "node infra-4 already has a taint dedicated with effect NoExecute, and --overwrite is false"},
		{"dedicated=new:NoExecute", true, "[dedicated=old:NoSchedule gpu:NoSchedule dedicated=new:NoExecute]", ""},
		{"dedicated=new:PreferNoSchedule", false, "[dedicated=old:NoSchedule dedicated=old:NoExecute gpu:NoSchedule dedicated=new:PreferNoSchedule]", ""},
		{"gpu=a100:NoSchedule", false, "", "node infra-4 already has a taint gpu with effect NoSchedule, and --overwrite is false"},
		{"gpu:NoSchedule", false, "", "node infra-4 already has a taint gpu with effect NoSchedule, and --overwrite is false"},
		{"gpu=a100:NoSchedule", true, "[dedicated=old:NoSchedule dedicated=old:NoExecute gpu=a100:NoSchedule]", ""},
	} {
		t.Run(fmt.Sprintf("%s overwrite=%v", tc.spec, tc.overwrite), func(t *testing.T) {
			n := testobj.Node("infra-4", testobj.NodeTaints(
				corev1.Taint{Key: "dedicated", Value: "old", Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: "dedicated", Value: "old", Effect: corev1.TaintEffectNoExecute},
				corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}))
			err := applyTaint(n, tc.spec, tc.overwrite)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, t := range n.Spec.Taints {
				parts = append(parts, t.ToString())
			}
			if got := "[" + strings.Join(parts, " ") + "]"; got != tc.want {
				t.Errorf("after %s: %s, want %s", tc.spec, got, tc.want)
			}
		})
	}
}

// TestCheckNodeChangeArgs: what kubectl refuses across its arguments,
// before it reads the node, is refused so here too.
func TestCheckNodeChangeArgs(t *testing.T) {
	for _, tc := range []struct {
		check   func([]string) error
		specs   []string
		wantErr string
	}{
		{checkTaintArgs, []string{"a=1:NoSchedule", "a=2:NoSchedule"}, "duplicated taints with the same key and effect: a=2:NoSchedule"},
		{checkTaintArgs, []string{"a=1:NoSchedule", "a=1:NoExecute"}, ""},
		{checkTaintArgs, []string{"a=1:NoSchedule", "a-"}, "can not both modify and remove taint a in the same command"},
		{checkTaintArgs, []string{"a=1:NoSchedule", "a=1:NoSchedule-"}, "can not both modify and remove taint a:NoSchedule in the same command"},
		{checkTaintArgs, []string{"a=1:NoSchedule", "a:NoExecute-"}, ""},
		{checkTaintArgs, []string{"a:NoSchedule-", "a-"}, ""},
		{checkTaintArgs, []string{"a=1:NoSchedule", "b=1"}, `taint "b=1": want KEY[=VALUE]:EFFECT`},
		{checkLabelArgs, []string{"pool=gpu", "pool-"}, "can not both modify and remove label pool in the same command"},
		{checkLabelArgs, []string{"pool=gpu", "zone-"}, ""},
		{checkLabelArgs, []string{"pool=gpu", "pool=cpu"}, ""},
	} {
		t.Run(strings.Join(tc.specs, " "), func(t *testing.T) {
			err := tc.check(tc.specs)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
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

// FuzzApplyTaintAndLabel feeds kubectl taint and label arguments to the
// parsers behind dsguard taint and label: never a panic; what they accept
// leaves the node as the API server would store it (keys and values valid,
// no two taints of one key and effect) and does what the argument says.
func FuzzApplyTaintAndLabel(f *testing.F) {
	for _, seed := range []string{"dedicated=infra:NoSchedule", "dedicated:NoSchedule-", "dedicated=old:NoExecute-", "gpu-",
		"pool=gpu", "pool-", "example.com/x=y:PreferNoSchedule", "=:", "-", "a=b=c:NoSchedule", "a:b:NoSchedule"} {
		f.Add(seed, false, true)
		f.Add(seed, true, false)
	}
	f.Fuzz(func(t *testing.T, spec string, overwrite, taint bool) {
		n := testobj.Node("infra-4", testobj.NodeLabels("pool", "infra"),
			testobj.NodeTaints(corev1.Taint{Key: "dedicated", Value: "old", Effect: corev1.TaintEffectNoSchedule}))
		apply := applyLabel
		if taint {
			apply = applyTaint
		}
		if err := apply(n, spec, overwrite); err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		seen := map[string]bool{}
		for _, tt := range n.Spec.Taints {
			if err := validKeyValue(tt.Key, tt.Value); err != nil && tt.Key != "dedicated" {
				t.Fatalf("%q stored an invalid taint %s: %v", spec, tt.ToString(), err)
			}
			id := tt.Key + ":" + string(tt.Effect)
			if seen[id] {
				t.Fatalf("%q left two taints %s: %v", spec, id, n.Spec.Taints)
			}
			seen[id] = true
		}
		for k, v := range n.Labels {
			if err := validKeyValue(k, v); err != nil {
				t.Fatalf("%q stored an invalid label %s=%s: %v", spec, k, v, err)
			}
		}
		if key, ok := strings.CutSuffix(spec, "-"); ok && (taint || !strings.Contains(key, "=")) {
			key, _, _ = strings.Cut(strings.SplitN(key, ":", 2)[0], "=")
			if _, has := n.Labels[key]; !taint && has {
				t.Fatalf("%q left label %s", spec, key)
			}
			return
		}
		if !taint {
			key, value, _ := strings.Cut(spec, "=")
			if n.Labels[key] != value {
				t.Fatalf("%q: label %s is %q", spec, key, n.Labels[key])
			}
		}
	})
}
