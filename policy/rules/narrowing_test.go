package rules

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

// TestControlPlaneToleration_NarrowingAgainstReality replays the ways a
// DaemonSet author may try to look "narrowed" to get out of
// control-plane-toleration, offline (model control-plane nodes) and against
// live nodes, next to the genuine narrowings the rule must leave alone.
func TestControlPlaneToleration_NarrowingAgainstReality(t *testing.T) {
	req := testobj.NodeReq
	term := testobj.NodeTerm
	affinity := func(terms ...corev1.NodeSelectorTerm) func(*appsv1.DaemonSet) {
		return testobj.WithRequiredNodeAffinity(terms...)
	}
	live := snapshotOf(
		testobj.ControlPlaneNode("cp-1", testobj.NodeLabels("topology.kubernetes.io/region", "eu-west-1")),
		testobj.PoolNodes("worker", 3, testobj.NodeLabels("topology.kubernetes.io/region", "eu-west-1", "node-pool", "general")),
		testobj.Node("win-1", testobj.NodeLabels(corev1.LabelOSStable, "windows")),
	)
	tests := []struct {
		name    string
		ds      *appsv1.DaemonSet
		offline bool // the verdict offline: true = reported
		live    bool // the verdict with the live nodes
	}{
		{"no placement at all",
			testobj.DS(testobj.WithTolerations()), true, true},
		{"evasion: required affinity kubernetes.io/hostname Exists",
			testobj.DS(testobj.WithTolerations(), affinity(term(req(corev1.LabelHostname, corev1.NodeSelectorOpExists)))), true, true},
		{"evasion: NotIn [fargate] on the EKS compute type",
			testobj.DS(testobj.WithTolerations(), affinity(term(req("eks.amazonaws.com/compute-type", corev1.NodeSelectorOpNotIn, "fargate")))), true, true},
		{"evasion: DoesNotExist of an unrelated label",
			testobj.DS(testobj.WithTolerations(), affinity(term(req("example.com/never-set", corev1.NodeSelectorOpDoesNotExist)))), true, true},
		{"evasion: two ORed terms, one of them always true",
			testobj.DS(testobj.WithTolerations(), affinity(
				term(req("node-pool", corev1.NodeSelectorOpIn, "general")),
				term(req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux")))), true, true},
		{"evasion: selecting the taint's own key",
			testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{cpKey: ""})), true, true},
		{"evasion: hostname NotIn a worker",
			testobj.DS(testobj.WithTolerations(), affinity(term(req(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, "worker-1")))), true, true},
		{"a label every live node carries: reaches cp-1 live (offline the model lacks it)",
			testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{"topology.kubernetes.io/region": "eu-west-1"})), false, true},
		{"genuine: Windows only",
			testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "windows"})), false, false},
		{"genuine: control-plane role DoesNotExist",
			testobj.DS(testobj.WithTolerations(), affinity(term(req(cpKey, corev1.NodeSelectorOpDoesNotExist)))), false, false},
		{"genuine: a node pool the control plane is not in",
			testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{"node-pool": "general"})), false, false},
		{"genuine: hostnames of the workers only",
			testobj.DS(testobj.WithTolerations(), affinity(term(req(corev1.LabelHostname, corev1.NodeSelectorOpIn, "worker-1", "worker-2")))), false, false},
		{"genuine: pinned to a worker by nodeName",
			testobj.DS(testobj.WithTolerations(), testobj.WithNodeName("worker-1")), false, false},
		{"size is no way out: 1,001 terms that exclude the control plane still count as aiming at it",
			testobj.DS(testobj.WithTolerations(), affinity(manyTerms(1001)...)), true, true},
	}
	params := defaultControlPlaneTolerationParams()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				where string
				env   *policy.Env
				want  bool
			}{{"offline", testEnv(), tt.offline}, {"live", nodeEnv(live), tt.live}} {
				fs := checkControlPlaneToleration(tt.ds, c.env, &params)
				if got := len(fs) > 0; got != c.want {
					t.Errorf("%s: reported = %v, want %v (%s)", c.where, got, c.want, describeFindings(fs))
				}
			}
		})
	}
}

// manyTerms are n terms that each select one worker by name (none selects
// the control plane).
func manyTerms(n int) []corev1.NodeSelectorTerm {
	out := make([]corev1.NodeSelectorTerm, n)
	for i := range out {
		out[i] = testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpIn, fmt.Sprintf("worker-%d", i)))
	}
	return out
}

// TestPlacementSize_Limits: the placement-size rule denies past each limit,
// offline and live, with the message the issue names.
func TestPlacementSize_Limits(t *testing.T) {
	hostnames := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("node-%d", i)
		}
		return out
	}
	bigCluster := snapshotOf(testobj.PoolNodes("node", 600))
	tests := []struct {
		name string
		ds   *appsv1.DaemonSet
		env  *policy.Env
		want string // message prefix, "" for no finding
	}{
		{"1,000 terms are within the limit", testobj.DS(testobj.WithRequiredNodeAffinity(manyTerms(1000)...)), testEnv(), ""},
		{"1,001 terms", testobj.DS(testobj.WithRequiredNodeAffinity(manyTerms(1001)...)), testEnv(),
			"affinity too large to judge: 1001 terms; limit 1000"},
		{"10,001 values", testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(
			testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, hostnames(10001)...)))), testEnv(),
			"affinity too large to judge: 10001 values; limit 10000"},
		{"1,000 hostname terms against 600 nodes, 600 of them named: too much work",
			testobj.DS(testobj.WithRequiredNodeAffinity(manyTerms(1000)...)), nodeEnv(bigCluster),
			"affinity too large to judge against 600 nodes: 1000 requirements × 601 node checks; limit 500000"},
		{"the same terms on a label every node shares: one class, cheap",
			testobj.DS(testobj.WithRequiredNodeAffinity(sharedLabelTerms(1000)...)), nodeEnv(bigCluster), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := checkPlacementSize(tt.ds, tt.env, nil)
			switch {
			case tt.want == "" && len(fs) > 0:
				t.Errorf("want no finding, got %s", describeFindings(fs))
			case tt.want != "" && (len(fs) != 1 || !strings.HasPrefix(fs[0].Message, tt.want)):
				t.Errorf("want %q, got %s", tt.want, describeFindings(fs))
			}
			if tt.want != "" && tt.env.Coverage(tt.ds) != nil {
				t.Error("a placement too large to judge was predicted anyway")
			}
		})
	}
}

func sharedLabelTerms(n int) []corev1.NodeSelectorTerm {
	out := make([]corev1.NodeSelectorTerm, n)
	for i := range out {
		out[i] = testobj.NodeTerm(testobj.NodeReq("node-pool", corev1.NodeSelectorOpIn, fmt.Sprintf("pool-%d", i)))
	}
	return out
}
