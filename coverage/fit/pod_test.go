package fit

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNewPod_KeepsTheWholeName(t *testing.T) {
	for _, tc := range []struct{ namespace, name, prefix string }{
		{"web", "frontend-7d9f8b6c5d-x2x4q", "web/frontend-7d9f8b6c5d-"},
		{"db", "postgres-0", "db/postgres-"},
		{"kube-system", "etcd", "kube-system/"},
		{"ns", "ends-with-dash-", "ns/ends-with-dash-"},
		{"ns", "a-sixteen-bytes-suffix", "ns/a-sixteen-bytes-"},
		{"ns", "x-abcdefghijk", "ns/x-"},
		{"ns", "x-abcdefghijkl", "ns/x-abcdefghijkl"},
		{"ns", "nodashatallbutlongerthanfifteen", "ns/nodashatallbutlongerthanfifteen"},
	} {
		whole := NewPod(tc.namespace, tc.name, 0, &Shape{})
		if whole.Prefix != tc.namespace+"/"+tc.name || whole.Namespace != tc.namespace {
			t.Errorf("%s: NewPod's Prefix %q Namespace %q, want the whole key", tc.name, whole.Prefix, whole.Namespace)
		}
		p := whole.Split()
		if p.Split() != p || whole.Prefix != tc.namespace+"/"+tc.name {
			t.Errorf("%s: Split twice differs from once, or changed the Shape it was given", tc.name)
		}
		if got, want := p.Key(), tc.namespace+"/"+tc.name; got != want {
			t.Errorf("Key() = %q, want %q", got, want)
		}
		if p.Prefix != tc.prefix || p.Namespace != tc.namespace {
			t.Errorf("%s: Prefix %q Namespace %q, want %q %q", tc.name, p.Prefix, p.Namespace, tc.prefix, tc.namespace)
		}
		if !p.HasKey(tc.namespace + "/" + tc.name) {
			t.Errorf("%s: HasKey of its own key is false", tc.name)
		}
		for _, other := range []string{tc.namespace + "/" + tc.name + "x", tc.namespace + "/" + tc.name[:len(tc.name)-1], "x" + tc.namespace + "/" + tc.name} {
			if p.HasKey(other) {
				t.Errorf("%s: HasKey(%q) is true", tc.name, other)
			}
		}
	}
}

// compareKeys must order Pods as their joined keys order, whatever the
// split: the preemption order of Pods alike in priority and start rests on it.
func TestCompareKeys_OrdersAsTheKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "ab-/"
	word := func() string {
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 20000 {
		a := NewPod("n"+word(), word(), 0, &Shape{}).Split()
		b := NewPod("n"+word(), word(), 0, &Shape{}).Split()
		if got, want := compareKeys(&a, &b), strings.Compare(a.Key(), b.Key()); got != want {
			t.Fatalf("compareKeys(%q, %q) = %d, want %d", a.Key(), b.Key(), got, want)
		}
	}
}

func TestBuilder_SharesShapesOfAWorkload(t *testing.T) {
	pod := func(name, cpu string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		}
	}
	app := map[string]string{"app": "frontend", "pod-template-hash": "7d9f8b6c5d"}
	b := NewBuilder()
	b.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	for _, p := range []*corev1.Pod{
		pod("frontend-7d9f8b6c5d-aaaaa", "100m", app),
		pod("frontend-7d9f8b6c5d-bbbbb", "100m", map[string]string{"app": "frontend", "pod-template-hash": "7d9f8b6c5d"}),
		pod("frontend-7d9f8b6c5d-ccccc", "200m", app),
		pod("frontend-6c5d7d9f8b-ddddd", "100m", app),
	} {
		if err := b.AddPod(p); err != nil {
			t.Fatal(err)
		}
	}
	pods := b.Build().list[0].Pods // the one node, n1
	shapes := map[*Shape][]string{}
	for i := range pods {
		shapes[pods[i].Shape] = append(shapes[pods[i].Shape], pods[i].Key())
	}
	if len(shapes) != 3 {
		t.Fatalf("4 Pods in %d shapes %v, want 3: the two alike share one", len(shapes), shapes)
	}
	for s, keys := range shapes {
		if len(keys) == 2 && (s.Requests.MilliCPU != 100 || s.Prefix != "web/frontend-7d9f8b6c5d-") {
			t.Errorf("shared shape %+v for %v", s, keys)
		}
	}
}

// The record's size is what a dump of millions of Pods costs.
func TestPod_Is24Bytes(t *testing.T) {
	if got := unsafe.Sizeof(Pod{}); got != 24 {
		t.Errorf("a Pod record is %d bytes, want 24", got)
	}
}

func TestSummarize_SaysHowMuchIsRequested(t *testing.T) {
	short := func(node string, used int64) NodeOutcome {
		return NodeOutcome{Node: node, Outcome: Outcome{Kind: DoesNotFit, Plugin: PluginNodeResourcesFit,
			Reasons:    []string{"Insufficient memory"},
			Shortfalls: []Shortfall{{Resource: corev1.ResourceMemory, Requested: 512 << 20, Used: used << 20, Allocatable: 4096 << 20}}}}
	}
	preempts := func(node string, used int64) NodeOutcome {
		o := short(node, used)
		o.Kind, o.Victims = Preempts, []Victim{{Key: "batch/job-" + node, Priority: 0}}
		return o
	}
	never := NodeOutcome{Node: "small-1", Outcome: Outcome{Kind: NeverFits, Plugin: PluginNodeResourcesFit,
		Reasons:    []string{"Insufficient memory"},
		Shortfalls: []Shortfall{{Resource: corev1.ResourceMemory, Requested: 512 << 20, Used: 0, Allocatable: 256 << 20}}}}
	for _, tc := range []struct {
		name     string
		outcomes []NodeOutcome
		want     string
	}{
		{"one share", []NodeOutcome{short("infra-1", 3980), short("infra-2", 3980)},
			"memory 97% requested (memory: asks 512Mi, at most 116Mi free)"},
		{"a range", []NodeOutcome{short("infra-1", 3700), short("infra-2", 4000)},
			"memory 90-97% requested (memory: asks 512Mi, at most 396Mi free)"},
		{"never fits says the request is above allocatable", []NodeOutcome{never},
			"memory request above allocatable (memory: asks 512Mi, at most 256Mi allocatable)"},
		{"a preempting group still says it preempts", []NodeOutcome{preempts("infra-1", 3980), preempts("infra-2", 3980)},
			"by preempting lower-priority Pods, memory 97% requested (memory: asks 512Mi, at most 116Mi free)"},
	} {
		got := NewReport(tc.outcomes).Summarize()
		if len(got) != 1 || got[0].Why != tc.want || len(got[0].Nodes) != len(tc.outcomes) {
			t.Errorf("%s: %+v, want one group of %d nodes: %q", tc.name, got, len(tc.outcomes), tc.want)
		}
	}
}

// A Report holds outcomes only where the Pod does not simply fit, yet
// names every node, counts every kind and writes (and reads back) every
// node's outcome in JSON, by node name; nodes not weighed stay counted
// apart.
func TestReport_KeepsOnlyWhatDoesNotFit(t *testing.T) {
	fits := func(node string) NodeOutcome { return NodeOutcome{Node: node, Outcome: Outcome{Kind: Fits}} }
	preempts := NodeOutcome{Node: "b", Outcome: Outcome{Kind: Preempts, Plugin: PluginNodeResourcesFit,
		Victims: []Victim{{Key: "apps/web-1", Priority: 0}}}}
	short := NodeOutcome{Node: "d", Outcome: Outcome{Kind: DoesNotFit, Plugin: PluginNodeResourcesFit,
		Reasons: []string{"Insufficient cpu"}}}
	all := []NodeOutcome{fits("a"), preempts, fits("c"), short, fits("e")}
	r := NewReport([]NodeOutcome{short, fits("e"), fits("a"), preempts, fits("c")})
	r.Unknown, r.Priority = 2, 1000
	if len(r.others) != 2 {
		t.Errorf("the report keeps %d outcomes, want the 2 that are not a plain fit", len(r.others))
	}
	if got := r.Outcomes(); !reflect.DeepEqual(got, all) {
		t.Errorf("Outcomes() = %+v, want %+v", got, all)
	}
	if r.Covered() != 5 || r.Count(Fits) != 3 || r.Count(Preempts) != 1 || r.Count(DoesNotFit) != 1 || r.Lands() != 4 {
		t.Errorf("Covered %d, fits %d, preempts %d, does not fit %d, lands %d; want 5, 3, 1, 1, 4",
			r.Covered(), r.Count(Fits), r.Count(Preempts), r.Count(DoesNotFit), r.Lands())
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Outcomes []NodeOutcome `json:"outcomes"`
		Unknown  int           `json:"unknownNodes"`
		Priority int32         `json:"priority"`
	}
	if err := json.Unmarshal(data, &wire); err != nil || !reflect.DeepEqual(wire.Outcomes, all) || wire.Unknown != 2 || wire.Priority != 1000 {
		t.Errorf("JSON %s (%v), want every node's outcome, unknownNodes 2 and priority 1000", data, err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(&back, r) {
		t.Errorf("read back from JSON: %+v (%v), want %+v", back, err, r)
	}
}

// PredictDaemonSet walks the covered nodes beside the cluster's: nodes it
// does not know or whose allocatable is unknown are counted apart wherever
// they fall, and covered nodes out of order give the same report.
func TestPredictDaemonSet_NodesUnknownOrOutOfOrder(t *testing.T) {
	b := NewBuilder()
	for _, name := range []string{"a", "b", "d", "f"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if name != "b" {
			n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")}
		}
		if name == "f" {
			n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("100m")
		}
		b.AddNode(n)
	}
	c := b.Build()
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "agent"}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}
	for _, tc := range []struct {
		nodes []string
		want  string
	}{
		{[]string{"0", "a", "b", "c", "d", "e", "f"}, "a=fits d=fits f=never-fits unknown=4"},
		{[]string{"f", "e", "d", "c", "b", "a", "0"}, "a=fits d=fits f=never-fits unknown=4"},
		// Out of order only after an unknown name, the walk having passed
		// what comes next; and a name twice, sorted or not.
		{[]string{"a", "z", "d"}, "a=fits d=fits unknown=1"},
		{[]string{"a", "d", "d", "f"}, "a=fits d=fits d=fits f=never-fits unknown=0"},
		{[]string{"d", "a", "d"}, "a=fits d=fits d=fits unknown=0"},
	} {
		r := c.PredictDaemonSet(ds, tc.nodes)
		got := ""
		for _, o := range r.Outcomes() {
			got += o.Node + "=" + string(o.Kind) + " "
		}
		if got += fmt.Sprintf("unknown=%d", r.Unknown); got != tc.want {
			t.Errorf("covering %v: %s, want %s", tc.nodes, got, tc.want)
		}
	}
}
