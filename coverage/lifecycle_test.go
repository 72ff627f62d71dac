package coverage

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/internal/testobj"
)

func TestLifecycle_Reason(t *testing.T) {
	declared := BuiltinLifecycle().With([]LifecycleTaint{
		{Key: "example.com/agent-not-ready", Reason: "declared by the policy"},
		{Key: "startup.example.com/", Prefix: true, Reason: "declared by the policy"},
		// Already built in: the built-in entry keeps its reason.
		{Key: "karpenter.sh/unregistered", Reason: "declared by the policy"},
	})
	tests := []struct {
		lifecycle *Lifecycle
		key       string
		want      string // "" when not a lifecycle taint
	}{
		// The kubelet's and the node lifecycle controller's.
		{builtinLifecycle, corev1.TaintNodeNotReady, "joining or failing"},
		{builtinLifecycle, corev1.TaintNodeUnreachable, LifecycleFailing},
		{builtinLifecycle, corev1.TaintNodeNetworkUnavailable, LifecycleJoining},
		{builtinLifecycle, corev1.TaintNodeOutOfService, LifecycleShuttingDown},
		// The cloud provider's, the autoscalers'.
		{builtinLifecycle, "node.cloudprovider.kubernetes.io/uninitialized", LifecycleJoining},
		{builtinLifecycle, "node.cloudprovider.kubernetes.io/shutdown", LifecycleShuttingDown},
		{builtinLifecycle, "karpenter.sh/unregistered", LifecycleJoining},
		{builtinLifecycle, "karpenter.sh/disrupted", LifecycleDisrupted},
		{builtinLifecycle, "ToBeDeletedByClusterAutoscaler", LifecycleDisrupted},
		{builtinLifecycle, "DeletionCandidateOfClusterAutoscaler", LifecycleDisrupted},
		// The agents'.
		{builtinLifecycle, "node.cilium.io/agent-not-ready", LifecycleAgentNotReady},
		{builtinLifecycle, "cni.istio.io/not-ready", LifecycleAgentNotReady},
		{builtinLifecycle, "ebs.csi.aws.com/agent-not-ready", LifecycleAgentNotReady},
		{builtinLifecycle, "efs.csi.aws.com/agent-not-ready", LifecycleAgentNotReady},
		{builtinLifecycle, "disk.csi.azure.com/agent-not-ready", LifecycleAgentNotReady},
		{builtinLifecycle, "pd.csi.storage.gke.io/startup", LifecycleAgentNotReady},
		{builtinLifecycle, "agent.datadoghq.com/not-ready", LifecycleAgentNotReady},
		// Prefixes.
		{builtinLifecycle, "readiness.k8s.io/NetworkReady", LifecycleBootstrapping},
		{builtinLifecycle, "startup-taint.cluster-autoscaler.kubernetes.io/csi", LifecycleBootstrapping},
		{builtinLifecycle, "ignore-taint.cluster-autoscaler.kubernetes.io/cilium-agent-not-ready", LifecycleBootstrapping},
		// Taints of what a node is, and near misses.
		{builtinLifecycle, "node-role.kubernetes.io/control-plane", ""},
		{builtinLifecycle, corev1.TaintNodeUnschedulable, ""},
		{builtinLifecycle, "nvidia.com/gpu", ""},
		{builtinLifecycle, "node.cilium.io/agent-not-ready-x", ""},
		{builtinLifecycle, "readiness.k8s.io", ""},
		{builtinLifecycle, "example.com/agent-not-ready", ""},
		{nil, corev1.TaintNodeNotReady, ""},
		// Declared ones join the built-in catalogue.
		{declared, "example.com/agent-not-ready", "declared by the policy"},
		{declared, "startup.example.com/gpu", "declared by the policy"},
		{declared, "startup.example.com", ""},
		{declared, "karpenter.sh/unregistered", LifecycleJoining},
		{declared, "node.cilium.io/agent-not-ready", LifecycleAgentNotReady},
	}
	for _, tt := range tests {
		got, ok := tt.lifecycle.Reason(tt.key)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Reason(%q) = %q, %v; want %q", tt.key, got, ok, tt.want)
		}
	}
	if l := BuiltinLifecycle().With(nil); l != builtinLifecycle {
		t.Errorf("With(nil) made a new catalogue")
	}
	// Every built-in entry is listed, once, with a reason.
	listed := builtinLifecycle.Taints()
	if len(listed) != len(builtinLifecycleTaints) {
		t.Errorf("Taints lists %d entries, the catalogue has %d", len(listed), len(builtinLifecycleTaints))
	}
	for _, e := range listed {
		if e.Reason == "" || e.Key == "" {
			t.Errorf("entry %v: no key or no reason", e)
		}
	}
}

func TestDeclaredLifecycleTaints(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // key, or key* for a prefix, then the reason
		err  string
	}{
		{name: "a NodePool's startup taints, not its taints", doc: `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
      startupTaints:
        - {key: example.com/driver-not-ready, effect: NoSchedule}
        - {key: node.cilium.io/agent-not-ready, value: "true", effect: NoExecute}
`, want: []string{"example.com/driver-not-ready: startup taint of NodePool gpu", "node.cilium.io/agent-not-ready: startup taint of NodePool gpu"}},
		{name: "an older NodePool version", doc: `
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: old}
spec: {template: {spec: {startupTaints: [{key: example.com/old, effect: NoSchedule}]}}}
`, want: []string{"example.com/old: startup taint of NodePool old"}},
		{name: "a NodePool without startup taints", doc: `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: plain}
spec: {template: {spec: {taints: [{key: dedicated, effect: NoSchedule}]}}}
`},
		{name: "a NodeReadinessRule's taint", doc: `
apiVersion: readiness.node.x-k8s.io/v1alpha1
kind: NodeReadinessRule
metadata: {name: nfs}
spec:
  conditions: [{type: example.com/NFSReady, requiredStatus: "True"}]
  taint: {key: example.com/nfs-not-ready, value: pending, effect: NoSchedule}
`, want: []string{"example.com/nfs-not-ready: taint of NodeReadinessRule nfs"}},
		{name: "another kind declares nothing", doc: `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {startupTaints: [{key: example.com/x, effect: NoSchedule}]}
`},
		{name: "a NodePool of another group declares nothing", doc: `
apiVersion: example.com/v1
kind: NodePool
metadata: {name: other}
spec: {template: {spec: {startupTaints: [{key: example.com/x, effect: NoSchedule}]}}}
`},
		{name: "a startup taint without a key", doc: `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: broken}
spec: {template: {spec: {startupTaints: [{effect: NoSchedule}]}}}
`, err: "NodePool broken: taint 0 has no key"},
		{name: "startupTaints that are no list", doc: `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: broken}
spec: {template: {spec: {startupTaints: example.com/x}}}
`, err: "NodePool broken: spec.template.spec.startupTaints"},
		{name: "a taint that is no object", doc: `
apiVersion: readiness.node.x-k8s.io/v1alpha1
kind: NodeReadinessRule
metadata: {name: broken}
spec: {taint: example.com/x}
`, err: "NodeReadinessRule broken: spec.taint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj unstructured.Unstructured
			if err := sigsyaml.Unmarshal([]byte(tt.doc), &obj.Object); err != nil {
				t.Fatal(err)
			}
			taints, err := DeclaredLifecycleTaints(&obj)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, lt := range taints {
				got = append(got, lt.String()+": "+lt.Reason)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestPredict_LifecycleSkipsAreNoGaps: a skip for a lifecycle taint, built
// in, declared by the cluster (the snapshot's catalogue) or by the policy
// (MarkLifecycle), is counted and marked, and leaves Gaps; any other taint
// stays a gap.
func TestPredict_LifecycleSkipsAreNoGaps(t *testing.T) {
	nodes := []*corev1.Node{
		testobj.Node("ready-1"),
		testobj.Node("cilium-1", testobj.NodeTaints(testobj.NoExecute("node.cilium.io/agent-not-ready"))),
		testobj.Node("karpenter-1", testobj.NodeTaints(testobj.NoExecute("karpenter.sh/unregistered"))),
		testobj.Node("drain-1", testobj.NodeTaints(testobj.NoSchedule("karpenter.sh/disrupted"))),
		testobj.Node("gpu-1", testobj.NodeTaints(testobj.NoSchedule("example.com/driver-not-ready"))),
		testobj.Node("infra-1", testobj.NodeTaints(testobj.TaintOf("dedicated", "infra", corev1.TaintEffectNoSchedule))),
	}
	nodePool := LifecycleTaint{Key: "example.com/driver-not-ready", Reason: "startup taint of NodePool gpu"}
	policy := NewLifecycle([]LifecycleTaint{{Key: "dedic", Prefix: true, Reason: "declared by the policy"}})
	tests := []struct {
		name      string
		declared  []LifecycleTaint
		policy    *Lifecycle
		gaps      []string          // nodes
		lifecycle map[string]string // node → reason
	}{
		{name: "built-in", gaps: []string{"gpu-1", "infra-1"},
			lifecycle: map[string]string{"cilium-1": LifecycleAgentNotReady, "karpenter-1": LifecycleJoining, "drain-1": LifecycleDisrupted}},
		{name: "declared by a NodePool", declared: []LifecycleTaint{nodePool}, gaps: []string{"infra-1"},
			lifecycle: map[string]string{"cilium-1": LifecycleAgentNotReady, "karpenter-1": LifecycleJoining, "drain-1": LifecycleDisrupted,
				"gpu-1": "startup taint of NodePool gpu"}},
		{name: "and by the policy", declared: []LifecycleTaint{nodePool}, policy: policy,
			lifecycle: map[string]string{"cilium-1": LifecycleAgentNotReady, "karpenter-1": LifecycleJoining, "drain-1": LifecycleDisrupted,
				"gpu-1": "startup taint of NodePool gpu", "infra-1": "declared by the policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := NewNodeSnapshot(nodes)
			snap.SetLifecycle(BuiltinLifecycle().With(tt.declared))
			cov := Predict(testobj.DS(testobj.WithTolerations()), snap)
			if tt.policy != nil {
				cov.MarkLifecycle(tt.policy)
			}
			if cov.Eligible != 1 || cov.Skipped() != 5 {
				t.Errorf("eligible %d, skipped %d; want 1 and 5: lifecycle taints count in predictions", cov.Eligible, cov.Skipped())
			}
			var gaps []string
			for _, s := range cov.Gaps() {
				gaps = append(gaps, s.Nodes()...)
			}
			slices.Sort(gaps)
			if !slices.Equal(gaps, tt.gaps) {
				t.Errorf("gaps %v, want %v", gaps, tt.gaps)
			}
			got := map[string]string{}
			for _, s := range cov.Skips {
				if s.Transient != (s.Lifecycle != "") {
					t.Errorf("skip %s: transient %v, lifecycle %q", s.Reason(), s.Transient, s.Lifecycle)
				}
				for _, n := range s.Nodes() {
					if s.Transient {
						got[n] = s.Lifecycle
					}
				}
			}
			if len(got) != len(tt.lifecycle) {
				t.Errorf("lifecycle skips %v, want %v", got, tt.lifecycle)
			}
			for n, want := range tt.lifecycle {
				if got[n] != want {
					t.Errorf("%s: lifecycle %q, want %q", n, got[n], want)
				}
			}
		})
	}
}
