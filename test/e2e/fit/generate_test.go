package fit

import (
	"fmt"
	"math/rand/v2"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dsguard/dsguard/coverage/fit"
)

// The namespaces: the bound Pods in one, the DaemonSets in the other, so
// anti-affinity terms must name or select namespaces to reach across.
const (
	fillNamespace  = "fit-fill"
	agentNamespace = "fit-agents"
	scenarioLabel  = "fit.dsguard.io/scenario"
	zoneLabel      = "topology.kubernetes.io/zone"
	dongle         = corev1.ResourceName("example.com/dongle")
)

// namespaceLabels are the labels of the two namespaces.
var namespaceLabels = map[string]map[string]string{
	fillNamespace:  {"team": "fill"},
	agentNamespace: {"team": "agents"},
}

// classes are the PriorityClasses; the bound Pods take the four plain ones,
// the DaemonSets any (or none: priority 0).
var classes = []schedulingv1.PriorityClass{
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-100"}, Value: 100},
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-200"}, Value: 200},
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-300"}, Value: 300},
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-400"}, Value: 400},
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-500"}, Value: 500},
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-500-never"}, Value: 500, PreemptionPolicy: ptr.To(corev1.PreemptNever)},
}

// scenario is one node with its bound Pods and the DaemonSet meant for it.
type scenario struct {
	id     string
	node   *corev1.Node
	filler []*corev1.Pod
	ds     *appsv1.DaemonSet
}

var image = "registry.k8s.io/pause:3.10"

func mcpu(v int64) resource.Quantity { return *resource.NewMilliQuantity(v, resource.DecimalSI) }
func mib(v int64) resource.Quantity  { return *resource.NewQuantity(v<<20, resource.BinarySI) }

// pick returns one of vs.
func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

// portChoices are few, so that collisions are common; two host IPs and the
// wildcard exercise NodePorts' 0.0.0.0 rule.
func randomPort(r *rand.Rand) corev1.ContainerPort {
	return corev1.ContainerPort{
		ContainerPort: 8000 + int32(r.IntN(100)),
		HostPort:      pick[int32](r, 9100, 9100, 9200),
		Protocol:      pick(r, corev1.ProtocolTCP, corev1.ProtocolTCP, corev1.ProtocolUDP),
		HostIP:        pick(r, "", "", "10.0.0.1", "10.0.0.2"),
	}
}

func portOf(p corev1.ContainerPort) fit.HostPort {
	hp := fit.HostPort{HostIP: p.HostIP, Protocol: p.Protocol, Port: p.HostPort}
	if hp.HostIP == "" {
		hp.HostIP = fit.DefaultBindAllHostIP
	}
	return hp
}

// clash reports whether p collides with a port of taken (the scheduler's
// rule, written out apart from coverage/fit's).
func clash(p corev1.ContainerPort, taken []corev1.ContainerPort) bool {
	a := portOf(p)
	for _, t := range taken {
		b := portOf(t)
		if a.Port == b.Port && a.Protocol == b.Protocol &&
			(a.HostIP == b.HostIP || a.HostIP == fit.DefaultBindAllHostIP || b.HostIP == fit.DefaultBindAllHostIP) {
			return true
		}
	}
	return false
}

// generate draws scenario i. The shapes are weighted so that each outcome
// (fits, preempts, does not fit, never fits) comes out often; the test
// asserts the shares.
func generate(r *rand.Rand, run string, i int) *scenario {
	id := fmt.Sprintf("%s-%03d", run, i)
	s := &scenario{id: id}

	cpu := int64(500 + 250*r.IntN(12)) // 0.5 to 3.25 cores
	mem := int64(512 * (1 + r.IntN(8)))
	pods := int64(2 + r.IntN(8))
	alloc := corev1.ResourceList{corev1.ResourceCPU: mcpu(cpu), corev1.ResourceMemory: mib(mem), corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}
	if r.IntN(4) == 0 {
		alloc[dongle] = *resource.NewQuantity(int64(r.IntN(3)), resource.DecimalSI)
	}
	name := "fit-" + id
	s.node = &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
			scenarioLabel: id, zoneLabel: "zone-" + id,
		}},
		Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "heartbeat node",
		}}},
	}

	// Bound Pods: up to the pods limit, most often filling a good share of
	// cpu and memory.
	n := r.IntN(int(min(pods, 6)) + 1)
	var taken []corev1.ContainerPort
	for j := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fill-%s-%d", id, j), Namespace: fillNamespace,
				Labels: map[string]string{"app": pick(r, "db", "web", "cache"), scenarioLabel: id}},
			Spec: corev1.PodSpec{
				NodeName:                      name,
				PriorityClassName:             pick(r, "fit-100", "fit-200", "fit-300", "fit-400"),
				TerminationGracePeriodSeconds: ptr.To[int64](30),
				Containers: []corev1.Container{{Name: "c", Image: image, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: mcpu(cpu * int64(r.IntN(45)) / 100), corev1.ResourceMemory: mib(mem * int64(r.IntN(45)) / 100),
				}}}},
			},
		}
		if q, ok := alloc[dongle]; ok && q.Value() > 0 && r.IntN(2) == 0 {
			// Extended resources cannot be overcommitted: the API server
			// wants a limit equal to the request.
			one := *resource.NewQuantity(1, resource.DecimalSI)
			p.Spec.Containers[0].Resources.Requests[dongle] = one
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{dongle: one}
		}
		// No two bound Pods share a host port: the scheduler keeps ports as
		// a set, and bound Pods skip its checks.
		if r.IntN(3) == 0 {
			if port := randomPort(r); !clash(port, taken) {
				taken = append(taken, port)
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{port}
			}
		}
		// Some bound Pods will not share their node with the agent.
		if r.IntN(8) == 0 {
			term := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}
			if r.IntN(2) == 0 {
				term.NamespaceSelector = &metav1.LabelSelector{}
			} else {
				term.Namespaces = []string{agentNamespace}
			}
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
		}
		s.filler = append(s.filler, p)
	}

	// The agent.
	labels := map[string]string{"app": "agent", scenarioLabel: id}
	c := corev1.Container{Name: "agent", Image: image, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: mcpu(cpu * int64(r.IntN(60)) / 100), corev1.ResourceMemory: mib(mem * int64(r.IntN(60)) / 100),
	}}}
	switch r.IntN(12) {
	case 0: // above allocatable
		c.Resources.Requests[corev1.ResourceCPU] = mcpu(cpu + 250)
	case 1:
		one := *resource.NewQuantity(1, resource.DecimalSI)
		c.Resources.Requests[dongle] = one
		c.Resources.Limits = corev1.ResourceList{dongle: one}
	}
	hostNetwork := false
	if r.IntN(3) == 0 {
		p := randomPort(r)
		if r.IntN(3) == 0 {
			// Under hostNetwork the container port is the host port: the
			// API server defaults the Pod's hostPort (not the template's).
			hostNetwork, p.ContainerPort, p.HostPort = true, p.HostPort, 0
		}
		c.Ports = []corev1.ContainerPort{p}
	}
	spec := corev1.PodSpec{
		Containers:        []corev1.Container{c},
		HostNetwork:       hostNetwork,
		PriorityClassName: pick(r, "", "fit-100", "fit-300", "fit-500", "fit-500", "fit-500", "fit-500-never"),
	}
	switch r.IntN(6) {
	case 0: // a larger init container
		spec.InitContainers = []corev1.Container{{Name: "init", Image: image, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: mcpu(cpu * int64(r.IntN(80)) / 100)}}}}
	case 1: // a sidecar adds up
		spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: image, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: mib(mem * int64(r.IntN(30)) / 100)}}}}
	}
	if r.IntN(2) == 0 {
		term := corev1.PodAffinityTerm{TopologyKey: pick(r, corev1.LabelHostname, zoneLabel),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pick(r, "db", "web", "cache")}}}
		switch r.IntN(4) {
		case 0, 2:
			term.Namespaces = []string{fillNamespace}
		case 1:
			term.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "fill"}}
		default: // its own namespace: matches no bound Pod
		}
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	}
	spec.NodeSelector = map[string]string{scenarioLabel: id}
	s.ds = &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-" + id, Namespace: agentNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{scenarioLabel: id}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	return s
}
