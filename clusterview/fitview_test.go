package clusterview

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/dsguard/dsguard/coverage/fit"
)

func fitTestNode(name, cpu string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110")}}}
}

func fitTestPod(name, node, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID(name + "-uid"),
		Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// fitTestAgent asks for cpu on every node.
func fitTestAgent(cpu, class string) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "agent"}}
	ds.Spec.Template.Spec = corev1.PodSpec{PriorityClassName: class, Containers: []corev1.Container{{Name: "a",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}
	return ds
}

type fitSourcesForTest struct {
	nodes, pods, classes, namespaces *fcache.FakeControllerSource
}

func startFitView(t testing.TB) (*FitView, fitSourcesForTest) {
	t.Helper()
	s := fitSourcesForTest{fcache.NewFakeControllerSource(), fcache.NewFakeControllerSource(),
		fcache.NewFakeControllerSource(), fcache.NewFakeControllerSource()}
	t.Cleanup(func() {
		s.nodes.Shutdown()
		s.pods.Shutdown()
		s.classes.Shutdown()
		s.namespaces.Shutdown()
	})
	v := &FitView{Nodes: s.nodes, Pods: s.pods, PriorityClasses: s.classes, Namespaces: s.namespaces, Log: logr.Discard()}
	return v, s
}

func run(t *testing.T, v *FitView) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- v.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
	select {
	case <-v.Built():
	case <-time.After(10 * time.Second):
		t.Fatal("the fit view was not built within 10s")
	}
}

// outcomes predicts the agent on both nodes and returns "node=kind" pairs.
func outcomes(c *fit.Cluster, ds *appsv1.DaemonSet) string {
	r := c.PredictDaemonSet(ds, []string{"n1", "n2"})
	if r.Error != "" {
		return "error: " + r.Error
	}
	s := ""
	for _, o := range r.Outcomes() {
		s += fmt.Sprintf("%s=%s ", o.Node, o.Kind)
	}
	return fmt.Sprintf("%s unknown=%d", s, r.Unknown)
}

// eventually polls the view's cluster until f holds, within a bound.
func eventually(t *testing.T, v *FitView, what string, f func(*fit.Cluster) bool) *fit.Cluster {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := v.Cluster()
		if c != nil && f(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFitView_KeepsTheClusterAsTheReflectorsSeeIt: the view is built only
// once all four sources are listed, its cluster predicts from the Pods'
// records, follows Pods and Nodes as they change, and shares the last
// cluster when an update changes nothing of a record.
func TestFitView_KeepsTheClusterAsTheReflectorsSeeIt(t *testing.T) {
	v, s := startFitView(t)
	s.nodes.Add(fitTestNode("n1", "2"))
	s.nodes.Add(fitTestNode("n2", "2"))
	s.pods.Add(fitTestPod("big", "n1", "1800m"))
	s.pods.Add(fitTestPod("small", "n2", "500m"))
	done := &corev1.Pod{}
	*done = *fitTestPod("done", "n2", "1500m")
	done.Status.Phase = corev1.PodSucceeded
	s.pods.Add(done)
	s.classes.Add(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Value: 1000})
	s.namespaces.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}})
	if v.Cluster() != nil || v.ReadyCheck(nil) == nil {
		t.Fatal("a view that has not started has a cluster or is ready")
	}
	run(t, v)
	if err := v.ReadyCheck(nil); err != nil {
		t.Fatalf("built but not ready: %v", err)
	}
	agent := fitTestAgent("500m", "")
	// The finished Pod holds nothing on n2.
	c := v.Cluster()
	if got, want := outcomes(c, agent), "n1=does-not-fit n2=fits  unknown=0"; got != want {
		t.Fatalf("outcomes = %q, want %q", got, want)
	}
	if c.Pods() != 2 {
		t.Errorf("pods = %d, want 2 (the finished one left out)", c.Pods())
	}
	// The agent's class resolves; with priority over the big Pod it
	// preempts it on n1.
	if got, want := outcomes(c, fitTestAgent("500m", "agents")), "n1=preempts n2=fits  unknown=0"; got != want {
		t.Errorf("with priority: outcomes = %q, want %q", got, want)
	}

	// A status report that changes nothing of the record: the same cluster.
	status := fitTestPod("small", "n2", "500m")
	status.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	s.pods.Modify(status)
	// A change that matters, delivered after it, shows when it is applied:
	// so the status report has been applied by then too.
	s.pods.Modify(fitTestPod("small", "n2", "1600m"))
	c2 := eventually(t, v, "the larger small Pod", func(c *fit.Cluster) bool {
		return outcomes(c, agent) == "n1=does-not-fit n2=does-not-fit  unknown=0"
	})
	if c2 == c {
		t.Error("a changed request did not make a new cluster")
	}
	if again := v.Cluster(); again != c2 {
		t.Error("with nothing changed, Cluster built a new cluster")
	}
	s.pods.Modify(status)
	eventually(t, v, "the small Pod back to 500m", func(c *fit.Cluster) bool {
		return outcomes(c, agent) == "n1=does-not-fit n2=fits  unknown=0"
	})
	// Applied straight to the stores (the reflectors are idle): the same
	// record again and a heartbeat change nothing, so the cluster is kept.
	c3 := v.Cluster()
	heartbeat := fitTestNode("n2", "2")
	heartbeat.Annotations = map[string]string{"heartbeat": "1"}
	if err := (fitPodStore{v}).Update(status); err != nil {
		t.Fatal(err)
	}
	if err := (fitNodeStore{v}).Update(heartbeat); err != nil {
		t.Fatal(err)
	}
	if v.Cluster() != c3 {
		t.Error("a status report and a heartbeat made a new cluster")
	}
	if err := (fitNodeStore{v}).Update(fitTestNode("n2", "3")); err != nil {
		t.Fatal(err)
	}
	if v.Cluster() == c3 {
		t.Error("a new allocatable kept the old cluster")
	}

	// The big Pod goes: n1 frees up. n2 grows its allocatable, then goes.
	s.pods.Delete(fitTestPod("big", "n1", "1800m"))
	eventually(t, v, "the big Pod deleted", func(c *fit.Cluster) bool {
		return outcomes(c, agent) == "n1=fits n2=fits  unknown=0"
	})
	s.nodes.Delete(fitTestNode("n2", "2"))
	eventually(t, v, "n2 deleted", func(c *fit.Cluster) bool { return outcomes(c, agent) == "n1=fits  unknown=1" })
}

// TestFitView_NominatedPodsMoveWhenBound: a Pod nominated for a node counts
// there as nominated, and once bound (to any node) only there.
func TestFitView_NominatedPodsMoveWhenBound(t *testing.T) {
	v, s := startFitView(t)
	s.nodes.Add(fitTestNode("n1", "2"))
	s.nodes.Add(fitTestNode("n2", "2"))
	nominated := fitTestPod("waiting", "", "1")
	nominated.Status.NominatedNodeName = "n1"
	s.pods.Add(nominated)
	run(t, v)
	nodeOf := func(c *fit.Cluster) string {
		r := c.PredictDaemonSet(fitTestAgent("1500m", ""), []string{"n1", "n2"})
		out := ""
		for _, o := range r.Outcomes() {
			out += o.Node + "=" + string(o.Kind) + " "
		}
		return out
	}
	// A nominated Pod of priority 0 counts against an agent of priority 0.
	if got, want := nodeOf(v.Cluster()), "n1=does-not-fit n2=fits "; got != want {
		t.Fatalf("nominated: %q, want %q", got, want)
	}
	s.pods.Modify(fitTestPod("waiting", "n2", "1"))
	eventually(t, v, "the Pod bound to n2", func(c *fit.Cluster) bool { return nodeOf(c) == "n1=fits n2=does-not-fit " })
	if got := v.Cluster().Pods(); got != 1 {
		t.Errorf("pods = %d after the move, want 1", got)
	}
}

// TestFitView_RelistDropsWhatIsGone: a relist applies what changed while
// the watch was down, Pods and Nodes missing from it included.
func TestFitView_RelistDropsWhatIsGone(t *testing.T) {
	v, _ := startFitView(t)
	v.init()
	nodes, pods := fitNodeStore{v}, fitPodStore{v}
	if err := nodes.Replace([]any{fitTestNode("n1", "2"), fitTestNode("n2", "2")}, ""); err != nil {
		t.Fatal(err)
	}
	if err := pods.Replace([]any{fitTestPod("a", "n1", "1"), fitTestPod("b", "n2", "1")}, ""); err != nil {
		t.Fatal(err)
	}
	for _, st := range []interface{ Replace([]any, string) error }{fitClassStore{v}, fitNamespaceStore{v}} {
		if err := st.Replace(nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	if c := v.Cluster(); c == nil || c.Pods() != 2 {
		t.Fatalf("after the first lists: %v", c)
	}
	// The relist, as the streamed list's store hands it over: transformed.
	tr := pods.Transformer()
	rec, err := tr(fitTestPod("b", "n2", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pods.Replace([]any{rec}, ""); err != nil {
		t.Fatal(err)
	}
	if err := nodes.Replace([]any{fitTestNode("n2", "2")}, ""); err != nil {
		t.Fatal(err)
	}
	c := v.Cluster()
	if got := outcomes(c, fitTestAgent("1500m", "")); got != "n2=does-not-fit  unknown=1" {
		t.Errorf("after the relist: %q", got)
	}
	if c.Pods() != 1 || len(v.nodes) != 1 {
		t.Errorf("after the relist: %d pods, %d nodes kept, want 1 and 1", c.Pods(), len(v.nodes))
	}
}

// TestFitView_UpdatesByDigest: a status update that changes nothing the
// record is made from is not made into a record (it allocates as much as
// passing it on does); one that changes its
// inputs but not the record keeps the record and takes the new digest
// (so that the next one is not made either); an in-place resize the
// kubelet reports changes what the node holds.
func TestFitView_UpdatesByDigest(t *testing.T) {
	v, _ := startFitView(t)
	v.init()
	nodes, pods := fitNodeStore{v}, fitPodStore{v}
	if err := nodes.Replace([]any{fitTestNode("n1", "2")}, ""); err != nil {
		t.Fatal(err)
	}
	pod := runningPod(fitTestPod("a", "n1", "1"))
	if err := pods.Replace([]any{pod}, ""); err != nil {
		t.Fatal(err)
	}
	for _, st := range []interface{ Replace([]any, string) error }{fitClassStore{v}, fitNamespaceStore{v}} {
		if err := st.Replace(nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	held := func() (*fit.Shape, uint64) {
		v.mu.Lock()
		defer v.mu.Unlock()
		place := v.pods["apps/a"]
		return place.node.bound[indexOf(place.node.bound, "apps/a")].Shape, place.digest
	}
	shape, digest := held()
	update := func(change func(*corev1.Pod)) {
		t.Helper()
		pod = pod.DeepCopy()
		change(pod)
		if err := pods.Update(pod); err != nil {
			t.Fatal(err)
		}
	}

	update(func(p *corev1.Pod) { p.Status.Message = "probe" })
	if s, d := held(); s != shape || d != digest {
		t.Errorf("a message: the record or digest changed (%p → %p, %x → %x)", shape, s, digest, d)
	}
	// Not made at all: making the record (its request) allocates a dozen
	// times; the update itself, its record and the slice of it, twice.
	if n := testing.AllocsPerRun(50, func() { _ = pods.Update(pod) }); n > 3 {
		t.Errorf("an update with the held digest allocated %.0f times: its record was made", n)
	}
	// The kubelet reports less in use than asked: the request is the
	// larger, and stays.
	update(func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
	})
	s, d := held()
	if s != shape || d == digest {
		t.Errorf("less reported in use: want the record kept and a new digest, got record %p → %p, digest %x → %x",
			shape, s, digest, d)
	}
	if want := fit.Digest(digestSeed, pod); d != want {
		t.Errorf("held digest %x, want the last version's %x", d, want)
	}
	if got := outcomes(v.Cluster(), fitTestAgent("1500m", "")); got != "n1=does-not-fit  unknown=1" {
		t.Errorf("before the resize: %q", got)
	}
	// The kubelet resizes the container in place to 200m and says so.
	update(func(p *corev1.Pod) {
		small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}
		p.Spec.Containers[0].Resources.Requests = small
		p.Status.ContainerStatuses[0].AllocatedResources = small
		p.Status.ContainerStatuses[0].Resources.Requests = small
	})
	if got := outcomes(v.Cluster(), fitTestAgent("1500m", "")); got != "n1=fits  unknown=1" {
		t.Errorf("after the resize to 200m: %q", got)
	}
}

// TestFitView_Gauges: the gauges count the Pod records and the nodes with
// an allocatable.
func TestFitView_Gauges(t *testing.T) {
	v, _ := startFitView(t)
	v.init()
	if err := (fitNodeStore{v}).Replace([]any{fitTestNode("n1", "2")}, ""); err != nil {
		t.Fatal(err)
	}
	// A Pod bound to a node the view has no Node object for counts as a
	// record, not as a node.
	if err := (fitPodStore{v}).Replace([]any{fitTestPod("a", "n1", "1"), fitTestPod("b", "gone", "1")}, ""); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"dsguard_fit_pods": 2, "dsguard_fit_nodes": 1}
	for _, c := range v.Collectors() {
		ch := make(chan prometheus.Metric, 1)
		c.Collect(ch)
		m := <-ch
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		name := m.Desc().String()
		for metric, value := range want {
			if strings.Contains(name, `"`+metric+`"`) && out.GetGauge().GetValue() != value {
				t.Errorf("%s = %v, want %v", metric, out.GetGauge().GetValue(), value)
			}
		}
	}
}

// TestFitView_NodesAlikeShareTheirLabels: nodes whose labels differ only
// by hostname share one map, each still answers its own hostname, and the
// table forgets a label set with its last node.
func TestFitView_NodesAlikeShareTheirLabels(t *testing.T) {
	v, _ := startFitView(t)
	v.init()
	node := func(name, zone string) *corev1.Node {
		n := fitTestNode(name, "2")
		n.Labels["topology.kubernetes.io/zone"] = zone
		return n
	}
	if err := (fitNodeStore{v}).Replace([]any{node("a1", "a"), node("a2", "a"), node("b1", "b")}, ""); err != nil {
		t.Fatal(err)
	}
	if len(v.labels) != 2 {
		t.Fatalf("%d label sets for two zones", len(v.labels))
	}
	a1, a2 := v.nodes["a1"].base, v.nodes["a2"].base
	if reflect.ValueOf(a1.Labels).UnsafePointer() != reflect.ValueOf(a2.Labels).UnsafePointer() {
		t.Error("two nodes of one zone hold two label maps")
	}
	for _, n := range []*fit.Node{a1, a2} {
		if h, ok := n.Label(corev1.LabelHostname); !ok || h != n.Name {
			t.Errorf("%s: hostname %q, %v", n.Name, h, ok)
		}
		if z, ok := n.Label("topology.kubernetes.io/zone"); !ok || z != "a" {
			t.Errorf("%s: zone %q, %v", n.Name, z, ok)
		}
	}
	// b1 moves to zone a: zone b's set goes with it.
	if err := (fitNodeStore{v}).Update(node("b1", "a")); err != nil {
		t.Fatal(err)
	}
	if len(v.labels) != 1 || v.labels[v.nodes["b1"].labels].refs != 3 {
		t.Errorf("after the move: %d label sets", len(v.labels))
	}
	if err := (fitNodeStore{v}).Replace(nil, ""); err != nil {
		t.Fatal(err)
	}
	if len(v.labels) != 0 {
		t.Errorf("no nodes left, %d label sets kept", len(v.labels))
	}
}

// BenchmarkFitView_HeapPerNode reports the heap the view holds per node of
// a fleet shaped like a cloud cluster's (pools × zones, a dozen labels),
// with no Pods: what it adds to the node view at 65,000 nodes.
func BenchmarkFitView_HeapPerNode(b *testing.B) {
	const nodes = 20000
	list := make([]any, nodes)
	for i := range nodes {
		n := fitTestNode(fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250), "8")
		for k, val := range map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3),
			"topology.kubernetes.io/region": "region-1", "node.kubernetes.io/instance-type": fmt.Sprintf("m6i.%dxlarge", 1+i%4),
			"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "cloud.example.com/node-pool": fmt.Sprintf("pool-%d", i%7),
			"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "failure-domain.beta.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3),
			"node.kubernetes.io/lifecycle": "normal", "karpenter.sh/capacity-type": "on-demand"} {
			n.Labels[k] = val
		}
		n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse("32Gi")
		list[i] = n
	}
	for b.Loop() {
		v, _ := startFitView(b)
		v.init()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := (fitNodeStore{v}).Replace(slices.Clone(list), ""); err != nil {
			b.Fatal(err)
		}
		v.Cluster()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/nodes, "B/node")
		runtime.KeepAlive(v)
	}
}

// BenchmarkFitView_HeapPerPod reports the heap the view holds per Pod
// record: Pods of twenty workloads, ten on each node, each with the labels
// and owner reference a ReplicaSet gives its Pods.
func BenchmarkFitView_HeapPerPod(b *testing.B) {
	const nodes, perNode = 2000, 10
	nodeList := make([]any, nodes)
	pods := make([]any, 0, nodes*perNode)
	for i := range nodes {
		name := fmt.Sprintf("node-%05d", i)
		nodeList[i] = fitTestNode(name, "8")
		for j := range perNode {
			p := fitTestPod(fmt.Sprintf("workload-%d-%08x-%05d", (i+j)%20, i*perNode+j, j), name, "100m")
			p.Labels = map[string]string{"app.kubernetes.io/name": fmt.Sprintf("workload-%d", (i+j)%20),
				"pod-template-hash": fmt.Sprintf("5d8f%d", (i+j)%20), "app.kubernetes.io/part-of": "shop"}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
				Name: fmt.Sprintf("workload-%d-5d8f", (i+j)%20), UID: "rs", Controller: new(true)}}
			p.Status.StartTime = &metav1.Time{Time: time.Unix(1_700_000_000, 0)}
			pods = append(pods, p)
		}
	}
	for b.Loop() {
		v, _ := startFitView(b)
		v.init()
		if err := (fitNodeStore{v}).Replace(slices.Clone(nodeList), ""); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := (fitPodStore{v}).Replace(slices.Clone(pods), ""); err != nil {
			b.Fatal(err)
		}
		v.Cluster()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(pods)), "B/pod")
		runtime.KeepAlive(v)
	}
}

// BenchmarkFitView_StatusUpdate is one Pod update that changes nothing the
// view keeps (a status report), in a view of 20,000 Pods.
// runningPod gives a Pod the status a kubelet of v1.33 or later writes for
// a running Pod: started, ready, each container's allocated and actual
// resources (which the request reads).
func runningPod(pod *corev1.Pod) *corev1.Pod {
	start := metav1.NewTime(time.Unix(1_700_000_000, 0))
	pod.Status.StartTime = &start
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
			Ready: true, AllocatedResources: c.Resources.Requests.DeepCopy(),
			Resources: c.Resources.DeepCopy(), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}})
	}
	return pod
}

// BenchmarkFitView_StatusUpdate is one status update of a running Pod that
// changes nothing the view keeps (its message), as most of a cluster's Pod
// events are.
func BenchmarkFitView_StatusUpdate(b *testing.B) {
	v, _ := startFitView(b)
	v.init()
	var nodes, pods []any
	for i := range 2000 {
		name := fmt.Sprintf("node-%05d", i)
		nodes = append(nodes, fitTestNode(name, "8"))
		for j := range 10 {
			pods = append(pods, runningPod(fitTestPod(fmt.Sprintf("p-%d-%d", i, j), name, "100m")))
		}
	}
	if err := (fitNodeStore{v}).Replace(nodes, ""); err != nil {
		b.Fatal(err)
	}
	if err := (fitPodStore{v}).Replace(pods, ""); err != nil {
		b.Fatal(err)
	}
	if err := errors.Join((fitClassStore{v}).Replace(nil, ""), (fitNamespaceStore{v}).Replace(nil, "")); err != nil {
		b.Fatal(err)
	}
	if v.Cluster() == nil {
		b.Fatal("no cluster after every list")
	}
	// The updates are made first: the loop measures the view alone.
	updates := make([]*corev1.Pod, 1000)
	for i := range updates {
		updates[i] = pods[i*len(pods)/len(updates)].(*corev1.Pod).DeepCopy()
		updates[i].Status.Message = fmt.Sprint(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := (fitPodStore{v}).Update(updates[i%len(updates)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if v.changed {
		b.Fatal("a status report changed the view")
	}
}
