package rules

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

// fitNode is a worker of 2 cpu and 4Gi.
func fitNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
			corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
}

// fitPod is a running Pod on node asking for cpu and memory; owner, when
// set, is the DaemonSet in its namespace that controls it.
func fitPod(ns, name, node, cpu, memory, owner string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example/c:v1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: owner,
			UID: "u", Controller: new(true)}}
	}
	return p
}

// fitCluster is what the scheduler weighs on nodes with pods bound to them.
func fitCluster(t *testing.T, nodes []*corev1.Node, pods ...*corev1.Pod) *fit.Cluster {
	t.Helper()
	b := fit.NewBuilder()
	for _, n := range nodes {
		b.AddNode(n)
	}
	for _, p := range pods {
		if err := b.AddPod(p); err != nil {
			t.Fatal(err)
		}
	}
	return b.Build()
}

// withRequests sets the agent container's requests.
func withRequests(cpu, memory string) func(*appsv1.DaemonSet) {
	return testobj.WithAgent(func(c *corev1.Container) {
		c.Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	})
}

func TestResourceFit(t *testing.T) {
	// worker-1 and worker-2 are nearly full; worker-3 has room; worker-4
	// holds the agent's own old Pod beside another Pod.
	nodes := []*corev1.Node{fitNode("worker-1"), fitNode("worker-2"), fitNode("worker-3"), fitNode("worker-4")}
	pods := []*corev1.Pod{
		fitPod("apps", "db-0", "worker-1", "1500m", "3Gi", ""),
		fitPod("apps", "batch-0", "worker-2", "1500m", "3Gi", ""),
		fitPod("apps", "web-0", "worker-3", "500m", "1Gi", ""),
		fitPod("monitoring", "agent-old", "worker-4", "1", "2Gi", "agent"),
		fitPod("apps", "cache-0", "worker-4", "1", "1Gi", ""),
	}
	snap := coverage.NewNodeSnapshot(nodes)
	for _, tc := range []struct {
		name  string
		ds    *appsv1.DaemonSet
		hide  bool
		noFit bool
		want  []wantFinding
	}{
		{name: "fits everywhere", ds: testobj.DS(withRequests("100m", "128Mi"))},
		{name: "no requests", ds: testobj.DS()},
		{name: "without the cluster's Pods the rule does not run", ds: testobj.DS(withRequests("1", "8Gi")), noFit: true},
		{
			// worker-4 fits because the agent's own old Pod makes way.
			name: "pending on some nodes warns and names them",
			ds:   testobj.DS(withRequests("1", "2Gi")),
			want: []wantFinding{{field: "spec.template.spec", action: policy.ActionWarn,
				prefix: "stays Pending on 2 of 4 nodes it covers: does not fit on 2 nodes (worker-1, worker-2): cpu 75% requested, " +
					"memory 75% requested (cpu: asks 1, at most 500m free; memory: asks 2Gi, at most 1Gi free) " +
					"(no lower-priority Pods there to preempt)"}},
		},
		{
			name: "another DaemonSet's Pod of the same size does not make way",
			ds:   testobj.DS(withRequests("1", "2Gi"), func(ds *appsv1.DaemonSet) { ds.Name = "other-agent" }),
			want: []wantFinding{{field: "spec.template.spec", action: policy.ActionWarn,
				prefix: "stays Pending on 3 of 4 nodes it covers", msg: []string{"worker-4"}}},
		},
		{
			name: "hidden node names",
			ds:   testobj.DS(withRequests("1", "2Gi")),
			hide: true,
			want: []wantFinding{{field: "spec.template.spec", action: policy.ActionWarn,
				prefix: "stays Pending on 2 of 4 nodes it covers", absent: []string{"worker-"}}},
		},
		{
			name: "lands nowhere denies",
			ds:   testobj.DS(withRequests("3", "1Gi")),
			want: []wantFinding{{field: "spec.template.spec",
				prefix: "lands on none of the 4 nodes it covers: never fits on 4 nodes (worker-1, worker-2, worker-3, worker-4): cpu request above allocatable " +
					"(cpu: asks 3, at most 2 allocatable)"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := nodeEnv(snap)
			env.HideNodeNames = tc.hide
			if !tc.noFit {
				env.Fit = fitCluster(t, nodes, pods...)
			}
			// The check's own actions; without Env.Fit, what Evaluate makes of it.
			got := findingsOf(policy.Evaluate(tc.ds, *env), resourceFitID)
			if env.Fit != nil {
				got = checkResourceFit(tc.ds, env, nil)
			}
			assertFindings(t, got, tc.want)
			if tc.hide && len(got) > 0 && len(got[0].Details) > 0 {
				t.Errorf("node names hidden, yet details %q", got[0].Details)
			}
		})
	}
}

// TestResourceFit_DetailsNameEveryNode: a message names five nodes a group;
// the details name them all.
func TestResourceFit_DetailsNameEveryNode(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 7 {
		nodes = append(nodes, fitNode(fmt.Sprintf("worker-%d", i)))
	}
	env := nodeEnv(coverage.NewNodeSnapshot(nodes))
	env.Fit = fitCluster(t, nodes)
	got := checkResourceFit(testobj.DS(withRequests("3", "1Gi")), env, nil)
	assertFindings(t, got, []wantFinding{{field: "spec.template.spec",
		prefix: "lands on none of the 7 nodes it covers: never fits on 7 nodes (worker-0, worker-1, worker-2, worker-3, worker-4 and 2 more)"}})
	want := "never-fits on worker-0, worker-1, worker-2, worker-3, worker-4, worker-5, worker-6: cpu request above allocatable"
	if len(got[0].Details) != 1 || !strings.HasPrefix(got[0].Details[0], want) {
		t.Errorf("details %q, want one line starting %q", got[0].Details, want)
	}
}

func TestPriorityClass(t *testing.T) {
	nodes := []*corev1.Node{fitNode("worker-1"), fitNode("worker-2")}
	db := fitPod("apps", "db-0", "worker-1", "1", "1Gi", "")
	db.Spec.Priority = new(int32(1000))
	apiserver := fitPod("kube-system", "kube-apiserver-worker-2", "worker-2", "250m", "256Mi", "")
	apiserver.Spec.Priority = new(int32(2000001000)) // system-node-critical: left out of the floor
	otherAgent := fitPod("logging", "fluent-bit-abc", "worker-2", "100m", "64Mi", "fluent-bit")
	otherAgent.Spec.Priority = new(int32(5000)) // a DaemonSet's Pod: left out of the floor
	withClass := func(name string) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.PriorityClassName = name }
	}
	for _, tc := range []struct {
		name     string
		ds       *appsv1.DaemonSet
		pods     []*corev1.Pod
		minValue *int
		hide     bool
		want     []wantFinding
	}{
		{name: "no workload Pods, no floor", ds: testobj.DS(), pods: []*corev1.Pod{apiserver, otherAgent}},
		{name: "system-node-critical is above every workload", ds: testobj.DS(withClass("system-node-critical")),
			pods: []*corev1.Pod{db, apiserver, otherAgent}},
		{
			name: "no class, below the database", ds: testobj.DS(), pods: []*corev1.Pod{db, apiserver, otherAgent},
			want: []wantFinding{{field: "spec.template.spec.priorityClassName",
				prefix: "no priorityClassName: its Pods get priority 0, not above 1000, the priority of apps/db-0 " +
					"(the most important Pod no DaemonSet controls): it needs 1001 or more to preempt such Pods"}},
		},
		{
			name: "hidden names", ds: testobj.DS(), pods: []*corev1.Pod{db}, hide: true,
			want: []wantFinding{{field: "spec.template.spec.priorityClassName",
				msg: []string{"not above 1000, the priority of a Pod"}, absent: []string{"db-0"}}},
		},
		{
			name: "the policy's minValue", ds: testobj.DS(withClass("system-cluster-critical")), pods: []*corev1.Pod{db},
			minValue: new(2000001000),
			want: []wantFinding{{field: "spec.template.spec.priorityClassName",
				prefix: `priorityClassName "system-cluster-critical" gives its Pods priority 2000000000, below the policy's minValue 2000001000`}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := nodeEnv(coverage.NewNodeSnapshot(nodes))
			env.Fit, env.HideNodeNames = fitCluster(t, nodes, tc.pods...), tc.hide
			assertFindings(t, checkPriorityClass(tc.ds, env, &PriorityClassParams{MinValue: tc.minValue}), tc.want)
		})
	}
}
