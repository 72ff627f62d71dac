package fit

import (
	"fmt"
	"math/rand/v2"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dsguard/dsguard/coverage/fit"
)

// The namespaces: the bound Pods in one, the DaemonSets in the other, so
// anti-affinity terms must name or select namespaces to reach across.
const (
	fillNamespace  = "fit-fill"
	agentNamespace = "fit-agents"
	scenarioLabel  = "fit.dsguard.io/scenario"
	// templateLabel marks the Pods of a DaemonSet's template before its
	// update, which the scheduler sees beside (maxSurge) or instead of
	// (maxUnavailable) the new one.
	templateLabel = "fit.dsguard.io/template"
	// tierLabel marks the zonal Pods, the only ones that a term with the
	// zone as its topology key selects (see fit-600).
	tierLabel = "tier"
	zoneLabel = "topology.kubernetes.io/zone"
	dongle    = corev1.ResourceName("example.com/dongle")
	// holdGate keeps a nominated Pod out of scheduling: the scheduler
	// counts it on its nominated node and never tries it, so it stays
	// nominated for as long as the test needs.
	holdGate = "fit.dsguard.io/hold"
)

// namespaceLabels are the labels of the two namespaces.
var namespaceLabels = map[string]map[string]string{
	fillNamespace:  {"team": "fill"},
	agentNamespace: {"team": "agents"},
}

// classes are the PriorityClasses; the bound Pods take the four plain ones
// and fit-600, the DaemonSets any below it (or none: priority 0).
var classes = []schedulingv1.PriorityClass{
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-100"}, Value: 100},
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-200"}, Value: 200},
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-300"}, Value: 300},
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-400"}, Value: 400},
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-500"}, Value: 500},
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-500-never"}, Value: 500, PreemptionPolicy: ptr.To(corev1.PreemptNever)},
	// Above every agent: the zonal Pods, whose presence decides the
	// outcome on other nodes of their zone, are never a victim, so no
	// agent's preemption changes what an agent elsewhere meets, and the
	// order in which the scheduler takes the agents does not matter.
	{ObjectMeta: metav1.ObjectMeta{Name: "fit-600"}, Value: 600},
}

// rollout is how the scenario's DaemonSet reaches its template.
type rollout int

const (
	// create: a new DaemonSet.
	create rollout = iota
	// replace: a template change under maxUnavailable; the controller
	// deletes the old Pod before it makes the new one, which is what
	// PredictDaemonSet assumes of every update.
	replace
	// surge: a template change under maxSurge; the new Pod comes beside
	// the old one, which stays until the new one is available. Fit does not
	// model that (PredictDaemonSet counts the old Pod as gone): the test
	// holds the scheduler to Predict with the old Pod counted as any bound
	// Pod, and reports where PredictDaemonSet's answer would differ.
	surge
)

func (r rollout) String() string { return [...]string{"create", "maxUnavailable", "maxSurge"}[r] }

// scenario is one node with its bound and nominated Pods and the DaemonSet
// meant for it; the node shares its zone with its neighbours in the run.
type scenario struct {
	id        string
	zone      string
	rollout   rollout
	node      *corev1.Node
	filler    []*corev1.Pod
	nominated []*corev1.Pod
	// old is the template before the update (replace and surge), oldPod
	// its Pod once bound and running.
	old    *corev1.PodTemplateSpec
	oldPod *corev1.Pod
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

// generateAll draws count scenarios. Runs of one to four consecutive nodes
// share a zone, so that a term with the zone as its topology key weighs
// the Pods of the other nodes too.
func generateAll(r *rand.Rand, run string, count int) []*scenario {
	out := make([]*scenario, 0, count)
	zone, left := 0, 0
	for i := range count {
		if left == 0 {
			zone, left = zone+1, 1+r.IntN(4)
		}
		left--
		out = append(out, generate(r, run, i, fmt.Sprintf("zone-%s-%d", run, zone)))
	}
	return out
}

// resourcePods is a pods count as allocatable lists it.
func resourcePods(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }

// generate draws scenario i in zone. The shapes are weighted so that each
// outcome (fits, preempts, does not fit, never fits) comes out often; the
// test asserts the shares.
func generate(r *rand.Rand, run string, i int, zone string) *scenario {
	id := fmt.Sprintf("%s-%03d", run, i)
	s := &scenario{id: id, zone: zone}

	cpu := int64(500 + 250*r.IntN(12)) // 0.5 to 3.25 cores
	mem := int64(512 * (1 + r.IntN(8)))
	pods := int64(2 + r.IntN(8))
	// A node that takes no Pod at all: the other way never to fit.
	closed := r.IntN(50) == 0
	if closed {
		pods = 0
	}
	alloc := corev1.ResourceList{corev1.ResourceCPU: mcpu(cpu), corev1.ResourceMemory: mib(mem), corev1.ResourcePods: resourcePods(pods)}
	if r.IntN(4) == 0 {
		alloc[dongle] = *resource.NewQuantity(int64(r.IntN(3)), resource.DecimalSI)
	}
	name := "fit-" + id
	s.node = &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
			scenarioLabel: id, zoneLabel: zone,
		}},
		Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "heartbeat node",
		}}},
	}
	if !closed {
		s.rollout = pick(r, create, create, create, create, create, replace, replace, replace, surge, surge)
	}

	// Bound Pods: up to the pods limit, most often filling a good share of
	// cpu and memory; an update leaves its old Pod a place.
	n := r.IntN(int(min(pods, 6)) + 1)
	if s.rollout != create {
		n = min(n, int(pods)-1)
	}
	var taken []corev1.ContainerPort
	usedCPU, usedMem := int64(0), int64(0)
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
		req := p.Spec.Containers[0].Resources.Requests
		usedCPU, usedMem = usedCPU+req.Cpu().MilliValue(), usedMem+req.Memory().Value()>>20
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
		if r.IntN(8) == 0 {
			// A zonal Pod: terms by the zone select it on every node of
			// the zone, and some repel the agents of the whole zone.
			p.Labels[tierLabel] = "zonal"
			p.Spec.PriorityClassName = "fit-600"
			if r.IntN(4) == 0 {
				p.Spec.Affinity = antiAgents(r, zoneLabel, map[string]string{"app": "agent", "flavor": pick(r, "a", "b", "c")})
			}
		} else if r.IntN(8) == 0 {
			// Some bound Pods will not share their node with the agent.
			p.Spec.Affinity = antiAgents(r, corev1.LabelHostname, map[string]string{"app": "agent"})
		}
		s.filler = append(s.filler, p)
	}

	// Nominated Pods: higher-priority Pods the scheduler has promised the
	// node (after a preemption, say), which it counts as already there for
	// any Pod of at most their priority. A scheduling gate keeps them from
	// being scheduled (and their nomination cleared) while the test runs.
	if !closed && r.IntN(4) == 0 {
		for j := range 1 + r.IntN(2) {
			if s.rollout != create && n+j+2 > int(pods) {
				break
			}
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nominated-%s-%d", id, j), Namespace: fillNamespace,
					Labels: map[string]string{"app": pick(r, "db", "web", "cache"), scenarioLabel: id}},
				Spec: corev1.PodSpec{
					NodeSelector:      map[string]string{corev1.LabelHostname: name},
					SchedulingGates:   []corev1.PodSchedulingGate{{Name: holdGate}},
					PriorityClassName: pick(r, "fit-100", "fit-300", "fit-400", "fit-500", "fit-600"),
					Containers: []corev1.Container{{Name: "c", Image: image, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: mcpu(cpu * int64(r.IntN(40)) / 100), corev1.ResourceMemory: mib(mem * int64(r.IntN(40)) / 100),
					}}}},
				},
				Status: corev1.PodStatus{NominatedNodeName: name},
			}
			req := p.Spec.Containers[0].Resources.Requests
			usedCPU, usedMem = usedCPU+req.Cpu().MilliValue(), usedMem+req.Memory().Value()>>20
			switch r.IntN(6) {
			case 0:
				p.Labels[tierLabel] = "zonal"
			case 1:
				p.Spec.Affinity = antiAgents(r, pick(r, corev1.LabelHostname, zoneLabel), map[string]string{"app": "agent"})
			}
			s.nominated = append(s.nominated, p)
		}
	}

	// The old template of an update: one that fits beside everything
	// above whatever its priority, so that its Pod is bound before the
	// update; its labels are none that a term selects, but the new
	// template's own.
	if s.rollout != create {
		freeCPU, freeMem := cpu-usedCPU, mem-usedMem
		if freeCPU <= 0 || freeMem <= 0 {
			s.rollout = create
		} else {
			c := corev1.Container{Name: "agent", Image: image, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: mcpu(freeCPU * int64(r.IntN(70)) / 100), corev1.ResourceMemory: mib(freeMem * int64(r.IntN(70)) / 100),
			}}}
			if r.IntN(3) == 0 {
				if port := randomPort(r); !clash(port, taken) {
					c.Ports = []corev1.ContainerPort{port}
				}
			}
			s.old = &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent-old", scenarioLabel: id, templateLabel: "old"}},
				Spec: corev1.PodSpec{
					Containers:        []corev1.Container{c},
					PriorityClassName: pick(r, "", "fit-100", "fit-300", "fit-500"),
					NodeSelector:      map[string]string{scenarioLabel: id},
				},
			}
		}
	}

	// The agent.
	labels := map[string]string{"app": "agent", "flavor": pick(r, "a", "b", "c"), scenarioLabel: id}
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
		if s.old != nil && len(s.old.Spec.Containers[0].Ports) > 0 && r.IntN(2) == 0 {
			// The same port as the old Pod: under maxSurge the new Pod
			// cannot bind beside it.
			p = s.old.Spec.Containers[0].Ports[0]
		}
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
	var terms []corev1.PodAffinityTerm
	if r.IntN(2) == 0 {
		term := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pick(r, "db", "web", "cache")}}}
		if r.IntN(2) == 0 {
			// By the zone, only zonal Pods: no agent's preemption removes
			// one, so what another node of the zone holds stays put.
			term.TopologyKey, term.LabelSelector.MatchLabels = zoneLabel, map[string]string{tierLabel: "zonal"}
			if r.IntN(2) == 0 {
				term.LabelSelector.MatchLabels["app"] = pick(r, "db", "web", "cache")
			}
		}
		switch r.IntN(4) {
		case 0, 2:
			term.Namespaces = []string{fillNamespace}
		case 1:
			term.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "fill"}}
		default: // its own namespace: matches no bound Pod
		}
		terms = append(terms, term)
	}
	if s.old != nil && r.IntN(4) == 0 {
		// Not beside its own old Pod: the DaemonSet's predecessor.
		terms = append(terms, corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent-old"}}})
	}
	if len(terms) > 0 {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
	}
	if r.IntN(4) == 0 {
		// Spread by zone over the agents. Fit does not model topology
		// spread; for a Pod pinned to its node it cannot turn the Pod
		// away: with nodeAffinityPolicy Honor (the default) only the
		// pinned node's zone is a domain, and the skew of one domain is
		// one at most. minDomains and nodeAffinityPolicy Ignore would make
		// it count, and are not generated.
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneLabel,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}
	}
	spec.NodeSelector = map[string]string{scenarioLabel: id}
	s.ds = &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-" + id, Namespace: agentNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{scenarioLabel: id}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	switch s.rollout {
	case replace:
		s.ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	case surge:
		s.ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}}
	}
	return s
}

// antiAgents is a required anti-affinity term by key against the agents
// with these labels, reaching their namespace by name or by an empty
// namespace selector.
func antiAgents(r *rand.Rand, key string, match map[string]string) *corev1.Affinity {
	term := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: match}}
	if r.IntN(2) == 0 {
		term.NamespaceSelector = &metav1.LabelSelector{}
	} else {
		term.Namespaces = []string{agentNamespace}
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
}
