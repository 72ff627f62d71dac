package fit

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// node builds a node with cpu in millicores, memory in MiB and a pods limit.
func node(cpu, memMiB, pods int64, podList ...Pod) *Node {
	n := &Node{
		Name:        "n1",
		Labels:      map[string]string{corev1.LabelHostname: "n1", "zone": "a"},
		Allocatable: Resources{MilliCPU: cpu, Memory: memMiB << 20},
		AllowedPods: pods,
		Pods:        podList,
	}
	n.Sort()
	return n
}

// bound builds a Pod record; start orders Pods of one priority.
func bound(key string, prio int32, cpu, memMiB int64, start uint32) Pod {
	return NewPod("default", key, start, &Shape{Priority: prio,
		Requests: Resources{MilliCPU: cpu, Memory: memMiB << 20}, Labels: map[string]string{"app": key}})
}

// reshaped returns p with a copy of its Shape changed by f: Shapes are shared.
func reshaped(p Pod, f func(s *Shape)) Pod {
	s := *p.Shape
	f(&s)
	p.Shape = &s
	return p
}

func withPorts(p Pod, ports ...HostPort) Pod { return reshaped(p, func(s *Shape) { s.Ports = ports }) }

func withTerms(t *testing.T, p Pod, terms ...corev1.PodAffinityTerm) Pod {
	t.Helper()
	ts, err := NewTerms(p.Namespace, terms)
	if err != nil {
		t.Fatal(err)
	}
	return reshaped(p, func(s *Shape) { s.AntiAffinity = ts })
}

func agent(prio int32, cpu, memMiB int64) *Candidate {
	return &Candidate{Namespace: "agents", Labels: map[string]string{"app": "agent"}, Priority: prio,
		Requests: Resources{MilliCPU: cpu, Memory: memMiB << 20}}
}

func avoid(key, value, topology string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: topology,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}
}

func keys(vs []Victim) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Key)
	}
	return out
}

func TestPredict(t *testing.T) {
	tcp80 := HostPort{HostIP: DefaultBindAllHostIP, Protocol: corev1.ProtocolTCP, Port: 80}
	tests := []struct {
		name        string
		c           *Candidate
		n           *Node
		others      []*Node
		kind        Kind
		reasons     []string
		victims     []string
		preemption  []string
		preemptMsg  string
		shortfallOf corev1.ResourceName
		free        int64
	}{
		{name: "empty node fits", c: agent(0, 100, 64), n: node(1000, 1024, 10), kind: Fits},
		{name: "exactly full fits", c: agent(0, 500, 512), n: node(1000, 1024, 10, bound("a", 0, 500, 512, 1)), kind: Fits},
		{name: "cpu short, no lower priority", c: agent(0, 600, 64), n: node(1000, 1024, 10, bound("a", 0, 500, 64, 1)),
			kind: DoesNotFit, reasons: []string{"Insufficient cpu"}, preemption: []string{ReasonNoVictims},
			shortfallOf: corev1.ResourceCPU, free: 500},
		{name: "cpu and memory short list both", c: agent(0, 600, 600), n: node(1000, 1024, 10, bound("a", 0, 500, 500, 1)),
			kind: DoesNotFit, reasons: []string{"Insufficient cpu", "Insufficient memory"}, preemption: []string{ReasonNoVictims},
			shortfallOf: corev1.ResourceMemory, free: 524 << 20},
		{name: "above allocatable never fits, preemption not tried", c: agent(100, 2000, 64), n: node(1000, 1024, 10, bound("a", 0, 500, 64, 1)),
			kind: NeverFits, reasons: []string{"Insufficient cpu"}, preemption: []string{ReasonPreemptionNotHelpful}},
		{name: "extended resource missing on node never fits", c: &Candidate{Priority: 10, Requests: Resources{Scalar: map[corev1.ResourceName]int64{"example.com/gpu": 1}}},
			n: node(1000, 1024, 10), kind: NeverFits, reasons: []string{"Insufficient example.com/gpu"}, preemption: []string{ReasonPreemptionNotHelpful}},
		{name: "pods limit reached", c: agent(0, 0, 0), n: node(1000, 1024, 1, bound("a", 0, 0, 0, 1)),
			kind: DoesNotFit, reasons: []string{ReasonTooManyPods}, preemption: []string{ReasonNoVictims}},
		{name: "pods limit zero never fits", c: agent(10, 0, 0), n: node(1000, 1024, 0),
			kind: NeverFits, reasons: []string{ReasonTooManyPods}, preemption: []string{ReasonNoVictims}},
		{name: "pods limit reached, preempts the one lower", c: agent(10, 0, 0), n: node(1000, 1024, 2, bound("hi", 20, 0, 0, 1), bound("lo", 0, 0, 0, 2)),
			kind: Preempts, reasons: []string{ReasonTooManyPods}, victims: []string{"default/lo"}},
		{name: "preempts the fewest, reprieving the most important first", c: agent(100, 600, 64),
			n: node(1000, 4096, 10, bound("p50-old", 50, 300, 64, 1), bound("p50-new", 50, 300, 64, 2), bound("p10", 10, 300, 64, 3), bound("p200", 200, 100, 64, 4)),
			// Without the three lower: 100 used. Reprieve p50-old (400), then p50-new (700 > 400 left? 1000-700=300 < 600: victim), then p10 (700: victim).
			kind: Preempts, reasons: []string{"Insufficient cpu"}, victims: []string{"default/p50-new", "default/p10"}},
		{name: "reprieve order is by start time within a priority", c: agent(100, 600, 64),
			n:    node(1000, 4096, 10, bound("b", 50, 300, 64, 2), bound("a", 50, 300, 64, 1)),
			kind: Preempts, reasons: []string{"Insufficient cpu"}, victims: []string{"default/b"}},
		{name: "not started Pods count as youngest", c: agent(100, 600, 64),
			n:    node(1000, 4096, 10, bound("unstarted", 50, 300, 64, 0), bound("started", 50, 300, 64, 5)),
			kind: Preempts, reasons: []string{"Insufficient cpu"}, victims: []string{"default/unstarted"}},
		{name: "preemption cannot free enough: reasons of the emptied node", c: agent(100, 900, 64),
			n:    node(1000, 4096, 10, bound("hi", 200, 500, 64, 1), bound("lo", 0, 100, 64, 2)),
			kind: DoesNotFit, reasons: []string{"Insufficient cpu"}, preemption: []string{"Insufficient cpu"}},
		{name: "preemptionPolicy Never waits", c: func() *Candidate { c := agent(100, 600, 64); c.PreemptNever = true; return c }(),
			n: node(1000, 1024, 10, bound("lo", 0, 500, 64, 1)), kind: DoesNotFit, reasons: []string{"Insufficient cpu"}, preemptMsg: MessagePreemptNeverEligible},
		{name: "host port taken on the wildcard", c: func() *Candidate {
			c := agent(0, 0, 0)
			c.Ports = []HostPort{{HostIP: "10.0.0.1", Protocol: corev1.ProtocolTCP, Port: 80}}
			return c
		}(), n: node(1000, 1024, 10, withPorts(bound("web", 0, 0, 0, 1), tcp80)),
			kind: DoesNotFit, reasons: []string{ReasonPorts}, preemption: []string{ReasonNoVictims}},
		{name: "same port other protocol is free", c: func() *Candidate {
			c := agent(0, 0, 0)
			c.Ports = []HostPort{{HostIP: DefaultBindAllHostIP, Protocol: corev1.ProtocolUDP, Port: 80}}
			return c
		}(), n: node(1000, 1024, 10, withPorts(bound("web", 0, 0, 0, 1), tcp80)), kind: Fits},
		{name: "same port on two distinct host IPs is free", c: func() *Candidate {
			c := agent(0, 0, 0)
			c.Ports = []HostPort{{HostIP: "10.0.0.2", Protocol: corev1.ProtocolTCP, Port: 80}}
			return c
		}(), n: node(1000, 1024, 10, withPorts(bound("web", 0, 0, 0, 1), HostPort{HostIP: "10.0.0.1", Protocol: corev1.ProtocolTCP, Port: 80})), kind: Fits},
		{name: "ports are checked before resources", c: func() *Candidate {
			c := agent(100, 5000, 0)
			c.Ports = []HostPort{tcp80}
			return c
		}(), n: node(1000, 1024, 10, withPorts(bound("web", 0, 0, 0, 1), tcp80)),
			// Preempting web frees the port but the request stays above allocatable.
			kind: NeverFits, reasons: []string{ReasonPorts}, preemption: []string{"Insufficient cpu"}},
		{name: "port held by a lower Pod is preempted", c: func() *Candidate {
			c := agent(100, 0, 0)
			c.Ports = []HostPort{tcp80}
			return c
		}(), n: node(1000, 1024, 10, withPorts(bound("web", 0, 0, 0, 1), tcp80), bound("other", 0, 0, 0, 2)),
			kind: Preempts, reasons: []string{ReasonPorts}, victims: []string{"default/web"}},
		{name: "own anti-affinity against a Pod there", c: func() *Candidate {
			c := agent(0, 0, 0)
			c.AntiAffinity = mustTerms(t, "agents", []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
				Namespaces: []string{"default"}, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}})
			return c
		}(), n: node(1000, 1024, 10, bound("db", 0, 0, 0, 1)),
			kind: DoesNotFit, reasons: []string{ReasonAntiAffinity}, preemption: []string{ReasonNoVictims}},
		{name: "own anti-affinity: the term's namespace defaults to the Pod's own", c: func() *Candidate {
			c := agent(0, 0, 0)
			c.AntiAffinity = mustTerms(t, "agents", []corev1.PodAffinityTerm{avoid("app", "db", corev1.LabelHostname)})
			return c
		}(), n: node(1000, 1024, 10, bound("db", 0, 0, 0, 1)), kind: Fits},
		{name: "existing Pod's anti-affinity against the agent", c: agent(0, 0, 0),
			n: node(1000, 1024, 10, withTerms(t, bound("loner", 0, 0, 0, 1), corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
				NamespaceSelector: &metav1.LabelSelector{}, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}})),
			kind: DoesNotFit, reasons: []string{ReasonExistingAntiAffinity}, preemption: []string{ReasonNoVictims}},
		{name: "existing Pod's anti-affinity: lower priority is preempted", c: agent(5, 0, 0),
			n: node(1000, 1024, 10, withTerms(t, bound("loner", 0, 0, 0, 1), corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
				NamespaceSelector: &metav1.LabelSelector{}, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}), bound("bystander", 0, 0, 0, 2)),
			kind: Preempts, reasons: []string{ReasonExistingAntiAffinity}, victims: []string{"default/loner"}},
		{name: "zone anti-affinity reaches a Pod on another node of the zone", c: func() *Candidate {
			c := agent(100, 0, 0)
			c.AntiAffinity = mustTerms(t, "default", []corev1.PodAffinityTerm{avoid("app", "db", "zone")})
			return c
		}(), n: node(1000, 1024, 10, bound("bystander", 0, 0, 0, 1)), others: []*Node{{Name: "n2", Labels: map[string]string{"zone": "a"}, Pods: []Pod{bound("db", 0, 0, 0, 1)}}},
			// The Pod on the other node is no victim: preemption works on
			// this node only, and evicting the bystander does not help.
			kind: DoesNotFit, reasons: []string{ReasonAntiAffinity}, preemption: []string{ReasonAntiAffinity}},
		{name: "zone anti-affinity ignores another zone", c: func() *Candidate {
			c := agent(0, 0, 0)
			c.AntiAffinity = mustTerms(t, "default", []corev1.PodAffinityTerm{avoid("app", "db", "zone")})
			return c
		}(), n: node(1000, 1024, 10), others: []*Node{{Name: "n2", Labels: map[string]string{"zone": "b"}, Pods: []Pod{bound("db", 0, 0, 0, 1)}}}, kind: Fits},
		{name: "a nominated Pod of higher priority holds its room", c: agent(10, 600, 64),
			n:    func() *Node { n := node(1000, 1024, 10); n.Nominated = []Pod{bound("nom", 20, 500, 64, 0)}; return n }(),
			kind: DoesNotFit, reasons: []string{"Insufficient cpu"}, preemption: []string{ReasonNoVictims}},
		{name: "a nominated Pod of lower priority does not", c: agent(10, 600, 64),
			n: func() *Node { n := node(1000, 1024, 10); n.Nominated = []Pod{bound("nom", 0, 500, 64, 0)}; return n }(), kind: Fits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Predict(tt.c, tt.n, NewDomain(tt.others))
			if got.Kind != tt.kind {
				t.Fatalf("kind = %s, want %s (%+v)", got.Kind, tt.kind, got)
			}
			if !slices.Equal(got.Reasons, tt.reasons) {
				t.Errorf("reasons = %q, want %q", got.Reasons, tt.reasons)
			}
			if !slices.Equal(keys(got.Victims), tt.victims) {
				t.Errorf("victims = %q, want %q", keys(got.Victims), tt.victims)
			}
			if !slices.Equal(got.PreemptionReasons, tt.preemption) {
				t.Errorf("preemption reasons = %q, want %q", got.PreemptionReasons, tt.preemption)
			}
			if got.PreemptionMessage != tt.preemptMsg {
				t.Errorf("preemption message = %q, want %q", got.PreemptionMessage, tt.preemptMsg)
			}
			if tt.shortfallOf != "" {
				i := slices.IndexFunc(got.Shortfalls, func(s Shortfall) bool { return s.Resource == tt.shortfallOf })
				if i < 0 || got.Shortfalls[i].Free() != tt.free {
					t.Errorf("shortfalls = %+v, want %s with %d free", got.Shortfalls, tt.shortfallOf, tt.free)
				}
			}
		})
	}
}

func mustTerms(t *testing.T, ns string, terms []corev1.PodAffinityTerm) []Term {
	t.Helper()
	ts, err := NewTerms(ns, terms)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestNewCandidate_Requests(t *testing.T) {
	q := resource.MustParse
	req := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q(cpu), corev1.ResourceMemory: q(mem)}}
	}
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	tests := []struct {
		name    string
		spec    corev1.PodSpec
		wantCPU int64
		wantMem int64
	}{
		{name: "containers summed", spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: req("100m", "64Mi")}, {Resources: req("200m", "64Mi")}}},
			wantCPU: 300, wantMem: 128 << 20},
		{name: "largest init container wins when larger", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: req("1", "32Mi")}, {Resources: req("500m", "1Gi")}},
			Containers:     []corev1.Container{{Resources: req("100m", "64Mi")}}},
			wantCPU: 1000, wantMem: 1 << 30},
		{name: "sidecars add to the containers", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: req("100m", "32Mi"), RestartPolicy: always}},
			Containers:     []corev1.Container{{Resources: req("100m", "64Mi")}}},
			wantCPU: 200, wantMem: 96 << 20},
		{name: "overhead added", spec: corev1.PodSpec{Overhead: corev1.ResourceList{corev1.ResourceCPU: q("50m")},
			Containers: []corev1.Container{{Resources: req("100m", "64Mi")}}},
			wantCPU: 150, wantMem: 64 << 20},
		{name: "pod-level requests replace the containers' sum", spec: corev1.PodSpec{Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("1")}},
			Containers: []corev1.Container{{Resources: req("100m", "64Mi")}}},
			wantCPU: 1000, wantMem: 64 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCandidate("ns", nil, &corev1.PodTemplateSpec{Spec: tt.spec}, NewPriorities(nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.Requests.MilliCPU != tt.wantCPU || c.Requests.Memory != tt.wantMem {
				t.Errorf("requests = %dm %d bytes, want %dm %d", c.Requests.MilliCPU, c.Requests.Memory, tt.wantCPU, tt.wantMem)
			}
		})
	}
}

func TestPriorities_Resolve(t *testing.T) {
	never := ptr.To(corev1.PreemptNever)
	classes := []schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Value: 1000},
		{ObjectMeta: metav1.ObjectMeta{Name: "polite"}, Value: 500, PreemptionPolicy: never},
		{ObjectMeta: metav1.ObjectMeta{Name: "default-b"}, Value: 7, GlobalDefault: true},
		{ObjectMeta: metav1.ObjectMeta{Name: "default-a"}, Value: 3, GlobalDefault: true},
	}
	tests := []struct {
		name    string
		spec    corev1.PodSpec
		value   int32
		never   bool
		wantErr bool
	}{
		{name: "named class", spec: corev1.PodSpec{PriorityClassName: "agents"}, value: 1000},
		{name: "class with Never", spec: corev1.PodSpec{PriorityClassName: "polite"}, value: 500, never: true},
		{name: "spec policy wins", spec: corev1.PodSpec{PriorityClassName: "agents", PreemptionPolicy: never}, value: 1000, never: true},
		{name: "built-in class", spec: corev1.PodSpec{PriorityClassName: "system-node-critical"}, value: 2000001000},
		{name: "lowest global default", spec: corev1.PodSpec{}, value: 3},
		{name: "unknown class", spec: corev1.PodSpec{PriorityClassName: "nope"}, wantErr: true},
	}
	p := NewPriorities(classes)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, never, err := p.Resolve(&tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (v != tt.value || never != tt.never) {
				t.Errorf("= %d never=%v, want %d never=%v", v, never, tt.value, tt.never)
			}
		})
	}
	if v, _, _ := NewPriorities(nil).Resolve(&corev1.PodSpec{}); v != 0 {
		t.Errorf("no classes: priority %d, want 0", v)
	}
}

func TestAggregate(t *testing.T) {
	q := resource.MustParse
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("1Gi"), corev1.ResourcePods: q("5"), "example.com/gpu": q("2")}}}}
	pod := func(name, node string, phase corev1.PodPhase, cpu string, prio int32) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.PodSpec{NodeName: node, Priority: ptr.To(prio), Containers: []corev1.Container{{
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q(cpu)}},
				Ports:     []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	nominated := pod("nominated", "", corev1.PodPending, "1", 9)
	nominated.Status.NominatedNodeName = "n1"
	pods := []corev1.Pod{
		pod("low", "n1", corev1.PodRunning, "100m", 1),
		pod("high", "n1", corev1.PodRunning, "200m", 5),
		pod("done", "n1", corev1.PodSucceeded, "1", 5),
		pod("failed", "n1", corev1.PodFailed, "1", 5),
		pod("elsewhere", "n9", corev1.PodRunning, "1", 5),
		nominated,
	}
	got, err := Aggregate(nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	n := got["n1"]
	if n.AllowedPods != 5 || n.Allocatable.MilliCPU != 2000 || n.Allocatable.Scalar["example.com/gpu"] != 2 {
		t.Errorf("allocatable = %+v pods %d", n.Allocatable, n.AllowedPods)
	}
	if len(n.Pods) != 2 || n.Pods[0].Key() != "ns/high" || n.Pods[1].Key() != "ns/low" {
		t.Fatalf("pods = %+v, want high then low, terminal and foreign ones left out", n.Pods)
	}
	if r := n.Requested(); r.MilliCPU != 300 {
		t.Errorf("requested cpu = %d, want 300", r.MilliCPU)
	}
	if b := n.Bands(); len(b) != 2 || b[0].Priority != 5 || b[0].Requests.MilliCPU != 200 || b[1].Pods != 1 {
		t.Errorf("bands = %+v", b)
	}
	if p := n.Pods[0].Ports; len(p) != 1 || p[0] != (HostPort{HostIP: DefaultBindAllHostIP, Protocol: corev1.ProtocolTCP, Port: 9100}) {
		t.Errorf("ports = %+v, want 9100 normalised to TCP on 0.0.0.0", p)
	}
	if len(n.Nominated) != 1 || n.Nominated[0].Key() != "ns/nominated" {
		t.Errorf("nominated = %+v", n.Nominated)
	}
	if _, err := Aggregate(nodes, []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "n1",
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}}}}}}}); err == nil {
		t.Error("a Pod with an invalid selector aggregated without error")
	}
}

// TestHostPorts: the ports a Pod holds, hostNetwork's defaulting included
// (a container port is its own host port), plain init containers' left out.
func TestHostPorts(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	tcp := func(port int32) corev1.ContainerPort { return corev1.ContainerPort{ContainerPort: port} }
	cases := []struct {
		name string
		spec corev1.PodSpec
		want []HostPort
	}{
		{"container port only: none", corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{tcp(9100)}}}}, nil},
		{"hostNetwork: the container port", corev1.PodSpec{HostNetwork: true,
			Containers: []corev1.Container{{Ports: []corev1.ContainerPort{tcp(9100), {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}}},
			[]HostPort{{"0.0.0.0", corev1.ProtocolTCP, 9100}, {"0.0.0.0", corev1.ProtocolUDP, 53}}},
		{"explicit hostPort and hostIP", corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
			{ContainerPort: 80, HostPort: 8080, HostIP: "10.0.0.1"}}}}}, []HostPort{{"10.0.0.1", corev1.ProtocolTCP, 8080}}},
		{"init containers: sidecars only", corev1.PodSpec{HostNetwork: true, InitContainers: []corev1.Container{
			{Ports: []corev1.ContainerPort{tcp(1)}}, {RestartPolicy: &always, Ports: []corev1.ContainerPort{tcp(2)}}}},
			[]HostPort{{"0.0.0.0", corev1.ProtocolTCP, 2}}},
	}
	for _, c := range cases {
		if got := HostPorts(&c.spec); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
