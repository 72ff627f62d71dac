package fit

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
)

// The built-in PriorityClasses every cluster has.
var builtinClasses = map[string]int32{
	"system-node-critical":    2000001000,
	"system-cluster-critical": 2000000000,
}

// Candidate is the Pod to place: a DaemonSet's Pod as the scheduler will
// see it. Its predictions share what they learn of the cluster's
// anti-affinity domains, so a Candidate is predicted against one Domain,
// from one goroutine.
type Candidate struct {
	Namespace string
	Labels    map[string]string
	// NamespaceLabels are the labels of the Pod's namespace, which the
	// namespace selectors of other Pods' terms match.
	NamespaceLabels map[string]string
	Priority        int32
	// PreemptNever is preemptionPolicy Never: the Pod waits rather than
	// evicting others.
	PreemptNever bool
	Requests     Resources
	Ports        []HostPort
	AntiAffinity []Term

	// domainHits holds, for each term of AntiAffinity (by index) once
	// asked, by value of its topology key, up to two nodes of that domain
	// with a Pod the term selects: the answer is the same for every node
	// of the domain. A value without such a node is not in the map.
	domainHits []map[string][]string
	// hostnames is 1 when every hostname is on one node at most, -1 when
	// not, 0 until asked (Domain.alone).
	hostnames int8
	// repelling holds, by topology key and value, up to two nodes with a
	// Pod whose required anti-affinity term selects this Pod there.
	repelling map[string]map[string][]string
}

// hostnamesAlone reports whether each node of d is alone with its hostname,
// asked of d once per candidate.
func (c *Candidate) hostnamesAlone(d *Domain) bool {
	if c.hostnames == 0 {
		c.hostnames = -1
		if d.alone(corev1.LabelHostname) {
			c.hostnames = 1
		}
	}
	return c.hostnames > 0
}

// Priorities resolves a Pod's priority and preemption policy as the
// Priority admission plugin does when the Pod is created.
type Priorities struct {
	classes map[string]schedulingv1.PriorityClass
	def     *schedulingv1.PriorityClass
}

// NewPriorities indexes the cluster's PriorityClasses.
func NewPriorities(classes []schedulingv1.PriorityClass) *Priorities {
	p := &Priorities{classes: make(map[string]schedulingv1.PriorityClass, len(classes))}
	for i := range classes {
		c := classes[i]
		p.classes[c.Name] = c
		// With two global defaults (a race the API allows), admission takes
		// the lower value.
		if c.GlobalDefault && (p.def == nil || c.Value < p.def.Value) {
			p.def = &c
		}
	}
	return p
}

// Resolve returns the priority and whether preemption is Never for a Pod
// spec: the named class (or a built-in one), else the global default class,
// else 0. A preemptionPolicy set in the spec wins, as admission only fills
// it in when empty. A name no class has is an error: admission refuses such
// a Pod.
func (p *Priorities) Resolve(spec *corev1.PodSpec) (int32, bool, error) {
	var value int32
	var policy *corev1.PreemptionPolicy
	switch name := spec.PriorityClassName; {
	case name != "":
		if v, ok := builtinClasses[name]; ok {
			value = v
			break
		}
		c, ok := p.classes[name]
		if !ok {
			return 0, false, fmt.Errorf("no PriorityClass named %q: the API server refuses the DaemonSet's Pods", name)
		}
		value, policy = c.Value, c.PreemptionPolicy
	case p.def != nil:
		value, policy = p.def.Value, p.def.PreemptionPolicy
	}
	if spec.PreemptionPolicy != nil {
		policy = spec.PreemptionPolicy
	}
	return value, policy != nil && *policy == corev1.PreemptNever, nil
}

// NewCandidate builds the Pod a DaemonSet's template becomes in namespace,
// whose labels are nsLabels; namespaces holds the labels of every
// namespace, for the namespace selectors of the template's anti-affinity
// terms.
func NewCandidate(namespace string, nsLabels map[string]string, tmpl *corev1.PodTemplateSpec,
	prio *Priorities, namespaces map[string]map[string]string) (*Candidate, error) {
	value, never, err := prio.Resolve(&tmpl.Spec)
	if err != nil {
		return nil, err
	}
	terms, err := NewTerms(namespace, RequiredAntiAffinity(&tmpl.Spec))
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Namespace = namespace
	return &Candidate{
		Namespace:       namespace,
		Labels:          tmpl.Labels,
		NamespaceLabels: nsLabels,
		Priority:        value,
		PreemptNever:    never,
		Requests:        PodRequests(pod),
		Ports:           HostPorts(&tmpl.Spec),
		AntiAffinity:    resolveNamespaces(terms, namespaces),
	}, nil
}
