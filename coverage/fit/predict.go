package fit

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Kind is the outcome for the Pod on the node.
type Kind string

// The outcomes.
const (
	// Fits: the scheduler binds the Pod as things are.
	Fits Kind = "fits"
	// Preempts: the scheduler evicts Victims, then binds the Pod.
	Preempts Kind = "preempts"
	// DoesNotFit: the Pod stays Pending until something on the node
	// changes; preemption does not help (or is not allowed).
	DoesNotFit Kind = "does-not-fit"
	// NeverFits: the Pod asks for more than the node has even empty (a
	// request above allocatable, or a pods limit of zero).
	NeverFits Kind = "never-fits"
)

// The filter plugins fit follows, by the names the scheduler gives them.
const (
	PluginNodePorts        = "NodePorts"
	PluginNodeResourcesFit = "NodeResourcesFit"
	PluginInterPodAffinity = "InterPodAffinity"
)

// The reasons the scheduler gives, word for word, as they appear in
// FailedScheduling events and the PodScheduled condition.
const (
	ReasonPorts                 = "node(s) didn't have free ports for the requested pod ports"
	ReasonTooManyPods           = "Too many pods"
	ReasonAntiAffinity          = "node(s) didn't match pod anti-affinity rules"
	ReasonExistingAntiAffinity  = "node(s) didn't satisfy existing pods anti-affinity rules"
	ReasonNoVictims             = "No preemption victims found for incoming pod"
	ReasonPreemptionNotHelpful  = "Preemption is not helpful for scheduling"
	MessagePreemptNeverEligible = "not eligible due to preemptionPolicy=Never."
)

// Shortfall is one resource the node lacks.
type Shortfall struct {
	Resource corev1.ResourceName `json:"resource"`
	// Requested by the Pod, Used by the Pods on the node, Allocatable on
	// the node, in the scheduler's units (millicores, bytes, units).
	Requested   int64 `json:"requested"`
	Used        int64 `json:"used"`
	Allocatable int64 `json:"allocatable"`
}

// Free is what the node has left of the resource.
func (s Shortfall) Free() int64 { return s.Allocatable - s.Used }

// Victim is a Pod the scheduler evicts to make room.
type Victim struct {
	Key      string `json:"pod"`
	Priority int32  `json:"priority"`
}

// Outcome is the prediction for the Pod on one node.
type Outcome struct {
	Kind Kind `json:"kind"`
	// Plugin is the filter that turns the node away as things are, and
	// Reasons its reasons; empty when the Pod fits without preemption.
	Plugin  string   `json:"plugin,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
	// Shortfalls are the resources behind NodeResourcesFit's reasons;
	// Ports the wanted host ports already taken.
	Shortfalls []Shortfall `json:"shortfalls,omitempty"`
	Ports      []HostPort  `json:"ports,omitempty"`
	// Victims, most important first, when Kind is Preempts.
	Victims []Victim `json:"victims,omitempty"`
	// PreemptionReasons are the reasons preemption gives for the node
	// when it does not help; PreemptionMessage replaces them when the Pod
	// may not preempt at all (preemptionPolicy Never).
	PreemptionReasons []string `json:"preemptionReasons,omitempty"`
	PreemptionMessage string   `json:"preemptionMessage,omitempty"`
}

// status is one filter pass over the node.
type status struct {
	plugin       string
	reasons      []string
	unresolvable bool
	shortfalls   []Shortfall
	ports        []HostPort
}

func (s *status) ok() bool { return s.plugin == "" }

// Predict returns what the scheduler does with c on node n. d holds the
// cluster's nodes (n may be among them): the Pods on those sharing a
// topology value with n count for anti-affinity terms whose topology key is
// not the hostname. n.Pods must be sorted (Aggregate and Sort do it).
func Predict(c *Candidate, n *Node, d *Domain) Outcome { return predict(c, n, d, "", false) }

// predict is Predict without the Pods of the DaemonSet owner
// (namespace/name; none when empty): its old Pod makes way for the new one.
// inDomain says that n is one of d's nodes: its Pods are then among those
// d's index finds.
func predict(c *Candidate, n *Node, d *Domain, owner string, inDomain bool) Outcome {
	e := newEvaluation(c, n, d)
	e.inDomain = inDomain
	if n.mayHold(owner) {
		for i := range n.Pods {
			if n.Pods[i].Owner == owner {
				if e.removed == nil {
					both := make([]bool, 2*len(n.Pods))
					e.removed, e.own = both[:len(n.Pods)], both[len(n.Pods):]
				}
				e.removed[i], e.own[i] = true, true
			}
		}
	}
	st := e.filter()
	if st.ok() {
		return Outcome{Kind: Fits}
	}
	out := Outcome{Kind: DoesNotFit, Plugin: st.plugin, Reasons: st.reasons, Shortfalls: st.shortfalls, Ports: st.ports}
	if e.neverFits() {
		out.Kind = NeverFits
	}
	// DefaultPreemption (PostFilter).
	switch {
	case c.PreemptNever:
		out.PreemptionMessage = MessagePreemptNeverEligible
		return out
	case st.unresolvable:
		// The node is not among the candidates for preemption.
		out.PreemptionReasons = []string{ReasonPreemptionNotHelpful}
		return out
	}
	var potential []int
	for i := range n.Pods {
		if n.Pods[i].Priority < c.Priority && !e.isOwn(i) {
			potential = append(potential, i)
		}
	}
	if len(potential) == 0 {
		out.PreemptionReasons = []string{ReasonNoVictims}
		return out
	}
	if e.removed == nil {
		e.removed = make([]bool, len(n.Pods))
	}
	for _, i := range potential {
		e.removed[i] = true
	}
	if st := e.filter(); !st.ok() {
		out.PreemptionReasons = st.reasons
		return out
	}
	// Reprieve as many as still let the Pod fit, most important first
	// (n.Pods is in that order already).
	var victims []Victim
	for _, i := range potential {
		e.removed[i] = false
		if st := e.filter(); !st.ok() {
			e.removed[i] = true
			victims = append(victims, Victim{Key: n.Pods[i].Key(), Priority: n.Pods[i].Priority})
		}
	}
	return Outcome{Kind: Preempts, Plugin: out.Plugin, Reasons: out.Reasons, Shortfalls: out.Shortfalls,
		Ports: out.Ports, Victims: victims}
}

// evaluation is the node as preemption edits it: Pods removed by index.
type evaluation struct {
	c *Candidate
	n *Node
	// removed are the Pods set aside: the DaemonSet's own (own), and the
	// victims preemption tries; nil while none is.
	removed, own []bool
	// inDomain is set when n is one of d's nodes (removed aside): a term
	// that selects no Pod of n's domain in d selects none of n's.
	inDomain bool
	// nominated are the nominated Pods of at least c's priority, which
	// the scheduler counts as already on the node.
	nominated []*Pod
	// d finds the other nodes' Pods that the anti-affinity terms of either
	// side can reach.
	d *Domain
}

func newEvaluation(c *Candidate, n *Node, d *Domain) *evaluation {
	e := &evaluation{c: c, n: n, d: d}
	for i := range n.Nominated {
		if n.Nominated[i].Priority >= c.Priority {
			e.nominated = append(e.nominated, &n.Nominated[i])
		}
	}
	return e
}

// Domain indexes the cluster's nodes for anti-affinity: the nodes that
// hold a Pod with required anti-affinity terms (few, in most clusters), and
// by topology key, the nodes of each value (built the first time a term
// asks for the key). A prediction then looks only at the nodes that can
// matter, instead of comparing its node with every other.
type Domain struct {
	nodes []*Node
	// withTerms are the nodes with a Pod that has required anti-affinity
	// terms.
	withTerms  []*Node
	mu         sync.Mutex
	byKey      map[string]map[string][]*Node
	aloneByKey map[string]bool
}

// NewDomain indexes nodes; it reads them, and a Cluster shares it between
// concurrent predictions.
func NewDomain(nodes []*Node) *Domain {
	d := &Domain{nodes: nodes, byKey: map[string]map[string][]*Node{}, aloneByKey: map[string]bool{}}
	for _, n := range nodes {
		if n != nil && n.holdsTerms() {
			d.withTerms = append(d.withTerms, n)
		}
	}
	return d
}

// sharing returns the nodes whose label key has value.
func (d *Domain) sharing(key, value string) []*Node {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.index(key)[value]
}

// alone reports whether each value of the label key is on one node at
// most: each node its own domain, as with the hostname in most clusters.
func (d *Domain) alone(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.index(key)
	return d.aloneByKey[key]
}

// index returns the nodes by value of the label key, made the first time
// the key is asked for; mu is held.
func (d *Domain) index(key string) map[string][]*Node {
	idx, ok := d.byKey[key]
	if !ok {
		idx = map[string][]*Node{}
		alone := true
		for _, n := range d.nodes {
			if n == nil {
				continue
			}
			if v, ok := n.Label(key); ok {
				idx[v] = append(idx[v], n)
				alone = alone && len(idx[v]) == 1
			}
		}
		d.byKey[key], d.aloneByKey[key] = idx, alone
	}
	return idx
}

func (e *evaluation) isOwn(i int) bool { return e.own != nil && e.own[i] }

// pods calls f for every Pod counted on the node: those not removed, and
// the nominated ones.
func (e *evaluation) pods(f func(p *Pod)) {
	for i := range e.n.Pods {
		if e.removed == nil || !e.removed[i] {
			f(&e.n.Pods[i])
		}
	}
	for _, p := range e.nominated {
		f(p)
	}
}

// filter runs the filters in the default profile's order and returns the
// first failure.
func (e *evaluation) filter() status {
	if st := e.nodePorts(); !st.ok() {
		return st
	}
	if st := e.resourcesFit(); !st.ok() {
		return st
	}
	return e.interPodAffinity()
}

func (e *evaluation) nodePorts() status {
	if len(e.c.Ports) == 0 {
		return status{}
	}
	var used []HostPort
	e.pods(func(p *Pod) { used = append(used, p.Ports...) })
	var taken []HostPort
	for _, want := range e.c.Ports {
		if conflicts(want, used) {
			taken = append(taken, want)
		}
	}
	if len(taken) == 0 {
		return status{}
	}
	return status{plugin: PluginNodePorts, reasons: []string{ReasonPorts}, ports: taken}
}

func (e *evaluation) resourcesFit() status {
	var st status
	count := int64(0)
	var used Resources
	e.pods(func(p *Pod) {
		count++
		used.Add(p.Requests)
	})
	if count+1 > e.n.AllowedPods {
		st.reasons = append(st.reasons, ReasonTooManyPods)
		st.shortfalls = append(st.shortfalls, Shortfall{Resource: corev1.ResourcePods, Requested: 1, Used: count, Allocatable: e.n.AllowedPods})
	}
	req, alloc := e.c.Requests, e.n.Allocatable
	if !req.IsZero() {
		check := func(name corev1.ResourceName, want, used, have int64) {
			if want > 0 && want > have-used {
				st.reasons = append(st.reasons, "Insufficient "+string(name))
				st.shortfalls = append(st.shortfalls, Shortfall{Resource: name, Requested: want, Used: used, Allocatable: have})
				if want > have {
					st.unresolvable = true
				}
			}
		}
		check(corev1.ResourceCPU, req.MilliCPU, used.MilliCPU, alloc.MilliCPU)
		check(corev1.ResourceMemory, req.Memory, used.Memory, alloc.Memory)
		check(corev1.ResourceEphemeralStorage, req.EphemeralStorage, used.EphemeralStorage, alloc.EphemeralStorage)
		if len(req.Scalar) > 0 {
			for _, rn := range slices.Sorted(maps.Keys(req.Scalar)) {
				check(rn, req.Scalar[rn], used.Scalar[rn], alloc.Scalar[rn])
			}
		}
	}
	if len(st.reasons) > 0 {
		st.plugin = PluginNodeResourcesFit
	}
	return st
}

// interPodAffinity checks the required anti-affinity terms both ways: the
// incoming Pod's against the Pods in its terms' domains, then those of the
// Pods already placed against the incoming Pod.
func (e *evaluation) interPodAffinity() status {
	n, c := e.n, e.c
	// The node's own Pods (as edited) count wherever the domain is;
	// other nodes' Pods only where they share the domain.
	for i := range c.AntiAffinity {
		t := &c.AntiAffinity[i]
		v, ok := n.Label(t.TopologyKey)
		if !ok {
			continue
		}
		hits := e.domainHits(i, t, v)
		hit := false
		selects := func(p *Pod) { hit = hit || t.matches(p.Namespace, p.Labels, nil) }
		if len(hits) > 0 || !e.inDomain {
			e.pods(selects)
		} else {
			// No Pod of the domain, this node's among them, is selected:
			// only a nominated one can be.
			for _, p := range e.nominated {
				selects(p)
			}
		}
		if hit || e.otherNodeIn(hits) {
			return status{plugin: PluginInterPodAffinity, reasons: []string{ReasonAntiAffinity}}
		}
	}
	hit := false
	repels := func(p *Pod) {
		for i := range p.AntiAffinity {
			t := &p.AntiAffinity[i]
			if _, ok := n.Label(t.TopologyKey); ok && t.matches(c.Namespace, c.Labels, c.NamespaceLabels) {
				hit = true
			}
		}
	}
	if !n.summed || n.terms {
		e.pods(repels)
	} else {
		for _, p := range e.nominated {
			repels(p)
		}
	}
	for key, values := range e.repelling() {
		if v, ok := n.Label(key); ok && !hit {
			hit = e.otherNodeIn(values[v])
		}
	}
	if hit {
		return status{plugin: PluginInterPodAffinity, reasons: []string{ReasonExistingAntiAffinity}}
	}
	return status{}
}

// otherNodeIn reports whether names holds a node other than the one judged.
func (e *evaluation) otherNodeIn(names []string) bool {
	return slices.ContainsFunc(names, func(name string) bool { return name != e.n.Name })
}

// domainHits returns up to two nodes of the domain where the candidate's
// term i has value v with a Pod the term selects. By the hostname, a
// node's domain is the node itself, as a rule, and each is asked once: it
// is looked at alone. By another key, the first question about a term
// answers it for every value, in one pass over the nodes, kept for the
// candidate's other nodes.
func (e *evaluation) domainHits(i int, t *Term, v string) []string {
	if t.TopologyKey == corev1.LabelHostname {
		if e.inDomain && e.c.hostnamesAlone(e.d) {
			// The node's domain is the node.
			return t.hitOn(e.n, nil)
		}
		var names []string
		for _, o := range e.d.sharing(t.TopologyKey, v) {
			if names = t.hitOn(o, names); len(names) == 2 {
				break
			}
		}
		return names
	}
	if e.c.domainHits == nil {
		e.c.domainHits = make([]map[string][]string, len(e.c.AntiAffinity))
	}
	hits := e.c.domainHits[i]
	if hits == nil {
		hits = map[string][]string{}
		for _, o := range e.d.nodes {
			if o == nil {
				continue
			}
			if w, ok := o.Label(t.TopologyKey); ok && len(hits[w]) < 2 {
				if names := t.hitOn(o, hits[w]); len(names) > 0 {
					hits[w] = names
				}
			}
		}
		e.c.domainHits[i] = hits
	}
	return hits[v]
}

// hitOn appends the name of node o to names when a Pod on it is one the
// term selects.
func (t *Term) hitOn(o *Node, names []string) []string {
	if slices.ContainsFunc(o.Pods, func(p Pod) bool { return t.matches(p.Namespace, p.Labels, nil) }) {
		return append(names, o.Name)
	}
	return names
}

// repelling returns, by topology key and value, up to two nodes with a Pod
// whose term selects the candidate in that domain, found once per
// candidate among the nodes with such terms.
func (e *evaluation) repelling() map[string]map[string][]string {
	c := e.c
	if c.repelling != nil {
		return c.repelling
	}
	c.repelling = map[string]map[string][]string{}
	for _, o := range e.d.withTerms {
		for i := range o.Pods {
			for j := range o.Pods[i].AntiAffinity {
				t := &o.Pods[i].AntiAffinity[j]
				v, ok := o.Label(t.TopologyKey)
				if !ok || !t.matches(c.Namespace, c.Labels, c.NamespaceLabels) {
					continue
				}
				byValue := c.repelling[t.TopologyKey]
				if byValue == nil {
					byValue = map[string][]string{}
					c.repelling[t.TopologyKey] = byValue
				}
				if names := byValue[v]; len(names) < 2 && !slices.Contains(names, o.Name) {
					byValue[v] = append(names, o.Name)
				}
			}
		}
	}
	return c.repelling
}

// neverFits reports whether the Pod would not fit even on the node emptied
// of every other Pod: a request above allocatable, or no room for one Pod.
func (e *evaluation) neverFits() bool {
	if e.n.AllowedPods < 1 {
		return true
	}
	req, alloc := e.c.Requests, e.n.Allocatable
	if req.MilliCPU > alloc.MilliCPU || req.Memory > alloc.Memory || req.EphemeralStorage > alloc.EphemeralStorage {
		return true
	}
	return slices.ContainsFunc(sortedKeys(req.Scalar), func(name corev1.ResourceName) bool {
		return req.Scalar[name] > alloc.Scalar[name]
	})
}

func sortedKeys(m map[corev1.ResourceName]int64) []corev1.ResourceName {
	keys := make([]corev1.ResourceName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
