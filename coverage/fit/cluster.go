package fit

import (
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Cluster is what fit needs to know of a cluster: its nodes with the
// records of the Pods on them, its PriorityClasses and its namespaces'
// labels. It holds no Pod objects.
type Cluster struct {
	// list is sorted by name: predictions walk it beside the covered
	// nodes (next). names are its nodes' names, in one array: the walk
	// reads them without loading each node.
	list  []*Node
	names []string
	// free is, per node of list, what its sums leave free: the walk
	// weighs most nodes by it alone, without loading the node (a cache
	// miss each, on thousands of nodes).
	free   []free
	domain *Domain
	// ports is set when some Pod holds a host port, known when some
	// node's allocatable is.
	ports, known bool
	priorities   *Priorities
	namespaces   map[string]map[string]string
	pods         int
	// workload is the most important Pod that no DaemonSet controls,
	// below the system classes (see WorkloadPriority).
	workload *Pod
	// room is what every known node leaves free by its sums.
	room room
}

// free is what one node's sums leave free: of cpu, memory and ephemeral
// storage, and of its pods limit. exact is false when the sums are not the
// whole story (they are not kept, or Pods are nominated for the node), and
// known when the node's allocatable is. 32 bytes: it is kept per node.
type free struct {
	milliCPU, memory, ephemeral int64
	pods                        int32
	known, exact                bool
}

func freeOf(n *Node) free {
	if !n.Known() {
		return free{}
	}
	return free{milliCPU: n.Allocatable.MilliCPU - n.used.MilliCPU, memory: n.Allocatable.Memory - n.used.Memory,
		ephemeral: n.Allocatable.EphemeralStorage - n.used.EphemeralStorage,
		pods:      int32(min(max(n.AllowedPods-int64(len(n.Pods)), math.MinInt32), math.MaxInt32)),
		known:     true, exact: n.summed && len(n.Nominated) == 0}
}

// holds reports whether a Pod asking for want fits by these sums: what
// fitsOutright finds with the Pod's own DaemonSet's Pods still counted,
// which only take room. False means "look closer", not "does not fit".
func (f *free) holds(want *Resources) bool {
	within := func(want, free int64) bool { return want <= 0 || want <= free }
	return f.exact && f.pods >= 1 && len(want.Scalar) == 0 && within(want.MilliCPU, f.milliCPU) &&
		within(want.Memory, f.memory) && within(want.EphemeralStorage, f.ephemeral)
}

// room is the least that any known node leaves free, by its sums (exact
// only when every known node's is). A Pod asking no more than that fits
// outright on every known node, whatever else it holds: the admission of a
// DaemonSet then weighs no node one by one, on any cluster with room.
type room struct{ free }

// add counts one known node in.
func (r *room) add(f *free, first bool) {
	if first {
		r.free = *f
		return
	}
	r.milliCPU, r.memory = min(r.milliCPU, f.milliCPU), min(r.memory, f.memory)
	r.ephemeral, r.pods = min(r.ephemeral, f.ephemeral), min(r.pods, f.pods)
	r.exact = r.exact && f.exact
}

// Builder gathers a Cluster from objects in any order, as a dump of
// `kubectl get nodes,pods,priorityclasses,namespaces -A -o yaml` streams
// them: each Pod is reduced to its record as it arrives, so memory follows
// the records, not the objects.
type Builder struct {
	nodes     map[string]*Node
	bound     map[string][]Pod // by node name, until Build
	nominated map[string][]Pod
	classes   []schedulingv1.PriorityClass
	nsLabels  map[string]map[string]string
	pods      int
	// shapes and labels share what Pods of one workload hold alike, so a
	// dump's records cost what differs from Pod to Pod.
	shapes map[string]*Shape
	labels map[string]map[string]string
	// key and labelsKey are the buffers a Shape's and a label map's keys
	// are made in (a Shape's key is held while its labels are shared).
	key, labelsKey []byte
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{nodes: map[string]*Node{}, bound: map[string][]Pod{}, nominated: map[string][]Pod{},
		nsLabels: map[string]map[string]string{}, shapes: map[string]*Shape{}, labels: map[string]map[string]string{}}
}

// AddNode adds a node, and returns its record; its status.allocatable is
// what fit weighs. Nodes that differ only by hostname (a pool in a zone)
// share one map of labels, as in clusterview.FitView, and a hostname that
// is the node's name shares its string.
func (b *Builder) AddNode(node *corev1.Node) *Node {
	n := NodeOf(node)
	n.Labels, n.Hostname = b.share(node.Labels, corev1.LabelHostname), node.Labels[corev1.LabelHostname]
	if n.Hostname == n.Name {
		n.Hostname = n.Name
	}
	b.nodes[node.Name] = n
	return n
}

// share returns the one map the Builder keeps for labels (skip left out).
func (b *Builder) share(labels map[string]string, skip string) map[string]string {
	b.labelsKey = appendLabelsKey(b.labelsKey[:0], labels, skip)
	if shared, ok := b.labels[string(b.labelsKey)]; ok {
		return shared
	}
	shared := maps.Clone(labels)
	delete(shared, skip)
	b.labels[string(b.labelsKey)] = shared
	return shared
}

// AddPod adds a Pod as the scheduler's cache counts it: Pods in phase
// Succeeded or Failed are left out (the scheduler does not even watch them),
// Pods being deleted still count until they are gone, and a Pod not bound
// but nominated for a node counts as nominated there.
func (b *Builder) AddPod(pod *corev1.Pod) error {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	name, into := pod.Spec.NodeName, b.bound
	if name == "" {
		name, into = pod.Status.NominatedNodeName, b.nominated
	}
	if name == "" {
		return nil
	}
	p, err := PodOf(pod)
	if err != nil {
		return err
	}
	p = p.Split()
	p.Shape = b.shareShape(p.Shape)
	into[name] = append(into[name], p)
	b.pods++
	return nil
}

// shareShape returns the Shape the Builder keeps for one alike. A Shape
// with anti-affinity terms is kept as it is: such Pods are few.
func (b *Builder) shareShape(s *Shape) *Shape {
	if len(s.AntiAffinity) == 0 {
		b.key = s.appendKey(b.key[:0])
		if shared, ok := b.shapes[string(b.key)]; ok {
			return shared
		}
	}
	// Kept: its Prefix must not hold on to the Pod's whole name (Split).
	s.Prefix = strings.Clone(s.Prefix)
	s.Namespace = s.Prefix[:len(s.Namespace)]
	s.Labels = b.share(s.Labels, "")
	if len(s.AntiAffinity) == 0 {
		b.shapes[string(b.key)] = s
	}
	return s
}

// AddPriorityClass adds a PriorityClass.
func (b *Builder) AddPriorityClass(c *schedulingv1.PriorityClass) { b.classes = append(b.classes, *c) }

// AddNamespace adds a namespace's labels, which namespace selectors of
// anti-affinity terms match.
func (b *Builder) AddNamespace(ns *corev1.Namespace) { b.nsLabels[ns.Name] = ns.Labels }

// Build attaches the Pods to their nodes (Pods of nodes not added are
// dropped, as the scheduler drops them) and returns the Cluster.
func (b *Builder) Build() *Cluster {
	list := make([]*Node, 0, len(b.nodes))
	for name, n := range b.nodes {
		n.Pods, n.Nominated = b.bound[name], b.nominated[name]
		n.Sort()
		list = append(list, n)
	}
	slices.SortFunc(list, func(a, b *Node) int { return cmp.Compare(a.Name, b.Name) })
	c := NewCluster(list, b.classes, b.nsLabels)
	*b = Builder{}
	return c
}

// NewCluster assembles a Cluster from nodes sorted by name, each with its
// Pods in order (Sort), the cluster's PriorityClasses and its namespaces'
// labels. It takes the nodes as they are, without copying them: a caller
// that keeps the cluster up to date (clusterview.FitView) replaces a
// changed node rather than changing it. The cost is one step per node and
// a look at each Pod (which nodes hold anti-affinity terms).
func NewCluster(list []*Node, classes []schedulingv1.PriorityClass, namespaces map[string]map[string]string) *Cluster {
	c := &Cluster{list: list, names: make([]string, len(list)), free: make([]free, len(list)), domain: NewDomain(list),
		priorities: NewPriorities(classes), namespaces: namespaces}
	for i, n := range list {
		c.names[i], c.free[i] = n.Name, freeOf(n)
		if c.free[i].known {
			c.room.add(&c.free[i], !c.known)
			c.known = true
		}
		c.pods += len(n.Pods) + len(n.Nominated)
		c.ports = c.ports || n.ports || !n.summed && slices.ContainsFunc(n.Pods, func(p Pod) bool { return len(p.Ports) > 0 })
		if p := n.workload; p != nil && (c.workload == nil || p.Priority > c.workload.Priority ||
			p.Priority == c.workload.Priority && compareKeys(p, c.workload) < 0) {
			c.workload = p
		}
	}
	return c
}

// HighestUserDefinablePriority is the highest value a PriorityClass other
// than the built-in system ones may have.
const HighestUserDefinablePriority = 1000000000

// WorkloadPriority returns the highest priority among the Pods that no
// DaemonSet controls (system classes left out: those belong to the control
// plane's own Pods), and the key of a Pod that has it; ok is false when
// there is none. A node agent below it cannot preempt such Pods.
func (c *Cluster) WorkloadPriority() (priority int32, pod string, ok bool) {
	if c.workload == nil {
		return 0, "", false
	}
	return c.workload.Priority, c.workload.Key(), true
}

// Pods is the number of Pods the nodes hold.
func (c *Cluster) Pods() int { return c.pods }

// Known reports whether the cluster knows what a node offers: a node saved
// without its status (dsguard nodes) has no allocatable to weigh.
func (n *Node) Known() bool { return !n.Allocatable.IsZero() || n.AllowedPods > 0 }

// Known reports whether any node's allocatable is known.
func (c *Cluster) Known() bool { return c.known }

// Report is the prediction for a DaemonSet's Pods on the nodes its
// placement covers. It names every node, but holds an outcome only for the
// nodes where the Pod does not simply fit: on a cluster of thousands of
// nodes the webhook predicts at every CREATE and UPDATE, and an outcome per
// node (some 180 bytes each) was most of what a request allocated.
type Report struct {
	// Error is set when no Pod can be made at all (a PriorityClass that
	// does not exist, a malformed term): then no node has an outcome.
	Error string
	// nodes are the covered nodes whose allocatable is known, sorted (the
	// others are counted in Unknown); others the outcomes on those of them
	// where the Pod does not simply fit, sorted by node. The Pod fits on a
	// node of nodes that others does not name.
	nodes   []string
	others  []NodeOutcome
	Unknown int
	// Priority is the priority the Pods get, PreemptNever their policy.
	Priority     int32
	PreemptNever bool
}

// reportJSON is a Report as JSON shows it: every node with its outcome.
type reportJSON struct {
	Error        string        `json:"error,omitempty"`
	Outcomes     []NodeOutcome `json:"outcomes"`
	Unknown      int           `json:"unknownNodes,omitempty"`
	Priority     int32         `json:"priority"`
	PreemptNever bool          `json:"preemptNever,omitempty"`
}

// NewReport is the report of outcomes by node (any order); for tests and
// readers of a report's JSON.
func NewReport(outcomes []NodeOutcome) *Report {
	r := &Report{}
	r.setOutcomes(outcomes)
	return r
}

func (r *Report) setOutcomes(outcomes []NodeOutcome) {
	outcomes = slices.SortedFunc(slices.Values(outcomes), byNode)
	r.nodes, r.others = make([]string, len(outcomes)), nil
	for i, o := range outcomes {
		r.nodes[i] = o.Node
		if !o.fits() {
			r.others = append(r.others, o)
		}
	}
}

// MarshalJSON writes the outcome of every node.
func (r Report) MarshalJSON() ([]byte, error) {
	return json.Marshal(reportJSON{Error: r.Error, Outcomes: r.Outcomes(), Unknown: r.Unknown,
		Priority: r.Priority, PreemptNever: r.PreemptNever})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Report) UnmarshalJSON(data []byte) error {
	var j reportJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*r = Report{Error: j.Error, Unknown: j.Unknown, Priority: j.Priority, PreemptNever: j.PreemptNever}
	r.setOutcomes(j.Outcomes)
	return nil
}

// NodeOutcome is the outcome on one node.
type NodeOutcome struct {
	Node string `json:"node"`
	Outcome
}

func byNode(a, b NodeOutcome) int { return cmp.Compare(a.Node, b.Node) }

// fits reports whether the outcome is a plain fit, which a Report does
// not keep.
func (o *Outcome) fits() bool {
	return o.Kind == Fits && o.Plugin == "" && o.PreemptionMessage == "" && len(o.Reasons)+len(o.Shortfalls)+
		len(o.Ports)+len(o.Victims)+len(o.PreemptionReasons) == 0
}

// Covered is the number of nodes weighed: the covered nodes whose
// allocatable is known.
func (r *Report) Covered() int { return len(r.nodes) }

// All yields every weighed node with its outcome, by node name. The
// outcome is the report's own (the nodes that fit share one): a caller
// reads it, and copies what it keeps.
func (r *Report) All() iter.Seq2[string, *Outcome] {
	return func(yield func(string, *Outcome) bool) {
		fits := Outcome{Kind: Fits}
		j := 0
		for _, name := range r.nodes {
			o := &fits
			if j < len(r.others) && r.others[j].Node == name {
				o = &r.others[j].Outcome
				j++
			}
			if !yield(name, o) {
				return
			}
		}
	}
}

// Outcomes returns every weighed node's outcome, sorted by node name.
func (r *Report) Outcomes() []NodeOutcome {
	out := make([]NodeOutcome, 0, len(r.nodes))
	for name, o := range r.All() {
		out = append(out, NodeOutcome{Node: name, Outcome: *o})
	}
	return out
}

// Count returns how many nodes have the outcome kind.
func (r *Report) Count(kind Kind) int {
	n := 0
	if kind == Fits {
		n = len(r.nodes) - len(r.others)
	}
	for i := range r.others {
		if r.others[i].Kind == kind {
			n++
		}
	}
	return n
}

// Lands reports how many nodes the Pod lands on, preempting or not.
func (r *Report) Lands() int { return r.Count(Fits) + r.Count(Preempts) }

// PredictDaemonSet predicts the DaemonSet's Pod on each named node (the
// nodes its placement covers). The DaemonSet's own Pods on a node are left
// out there, as they are once the controller deletes the old Pod to make
// the new one on an update: what counts is whether the new Pod fits in
// their place.
func (c *Cluster) PredictDaemonSet(ds *appsv1.DaemonSet, nodes []string) *Report {
	cand, err := NewCandidate(ds.Namespace, c.namespaces[ds.Namespace], &ds.Spec.Template, c.priorities, c.namespaces)
	if err != nil {
		return &Report{Error: err.Error()}
	}
	r := &Report{Priority: cand.Priority, PreemptNever: cand.PreemptNever}
	own := ds.Namespace + "/" + ds.Name
	// Without host ports and anti-affinity on either side, NodePorts and
	// InterPodAffinity pass everywhere: a node whose sums leave room fits,
	// whatever its Pods are (the scheduler's order of filters gives the
	// same outcome), and only the others are predicted Pod by Pod.
	outright := len(cand.Ports) == 0 && len(cand.AntiAffinity) == 0 &&
		len((&evaluation{c: cand, d: c.domain}).repelling()) == 0
	everywhere := outright && c.room.holds(&cand.Requests)
	if c.predictOn(r, cand, own, outright, everywhere, nodes, true) {
		return r
	}
	// A name came out of order: the report lists the nodes sorted.
	c.predictOn(r, cand, own, outright, everywhere, slices.Sorted(slices.Values(nodes)), false)
	return r
}

// predictOn fills r with the outcomes on nodes, and shares nodes as the
// report's own unless some are not weighed. With inOrder it stops, false,
// at a name out of order (next), for r to be filled again from a sorted
// copy; a sorted copy may still hold a name twice.
func (c *Cluster) predictOn(r *Report, cand *Candidate, own string, outright, everywhere bool, nodes []string, inOrder bool) bool {
	r.nodes, r.others, r.Unknown = nodes, nil, 0
	at := 0
	for i, name := range nodes {
		k, ordered := c.next(&at, name)
		if inOrder && !ordered {
			return false
		}
		if k < 0 || !c.free[k].known {
			if r.Unknown++; r.Unknown == 1 {
				r.nodes = slices.Clone(nodes[:i])
			}
			continue
		}
		if r.Unknown > 0 {
			r.nodes = append(r.nodes, name)
		}
		// By the sums beside the names first: with the DaemonSet's own
		// old Pods still counted, which only take room, most nodes fit.
		if everywhere || outright && c.free[k].holds(&cand.Requests) {
			continue
		}
		if n := c.list[k]; !(outright && n.fitsOutright(&cand.Requests, own)) {
			if o := predict(cand, n, c.domain, own, true); !o.fits() {
				r.others = append(r.others, NodeOutcome{Node: name, Outcome: o})
			}
		}
	}
	return true
}

// Summary is one line per group of nodes with the same outcome and main
// reason, most nodes first: "does not fit on 14 nodes: memory 97%
// requested (infra-1, ...)".
type Summary struct {
	Kind  Kind
	Why   string
	Nodes []string
}

// Summarize groups the outcomes for display. A group turned away by
// resources says what the Pod asks and the most any of its nodes has free.
func (r *Report) Summarize() []Summary {
	var out []Summary
	var groups []*figures // per group, gathered in the same pass
	index := map[string]int{}
	for name, o := range r.All() {
		why, note := o.why()
		key := string(o.Kind) + "\x00" + why + "\x00" + note
		j, ok := index[key]
		if !ok {
			j = len(out)
			index[key] = j
			out = append(out, Summary{Kind: o.Kind, Why: why})
			groups = append(groups, &figures{note: note, never: o.Kind == NeverFits})
		}
		out[j].Nodes = append(out[j].Nodes, name)
		groups[j].add(o)
	}
	for j := range out {
		if shares := groups[j].shares(); shares != "" {
			// A preempting group keeps saying how it lands.
			if out[j].Kind == Preempts {
				out[j].Why += ", " + shares
			} else {
				out[j].Why = shares
			}
		}
		out[j].Why += groups[j].String()
	}
	order := map[Kind]int{NeverFits: 0, DoesNotFit: 1, Preempts: 2, Fits: 3}
	slices.SortStableFunc(out, func(a, b Summary) int {
		return cmp.Or(cmp.Compare(order[a.Kind], order[b.Kind]), cmp.Compare(len(b.Nodes), len(a.Nodes)))
	})
	return out
}

// figures gathers, for one group of nodes, what the Pod asks of each
// resource that turns them away and the most any of them has: free, or
// allocatable for a group that never fits (a group shares its kind).
type figures struct {
	names []corev1.ResourceName
	asked map[corev1.ResourceName]int64
	most  map[corev1.ResourceName]int64
	// low and high bound the share of allocatable already requested, in
	// percent, over the group's nodes.
	low, high map[corev1.ResourceName]int64
	never     bool
	note      string
}

func (f *figures) add(o *Outcome) {
	if o.Plugin != PluginNodeResourcesFit {
		return
	}
	if f.asked == nil {
		f.asked, f.most = map[corev1.ResourceName]int64{}, map[corev1.ResourceName]int64{}
		f.low, f.high = map[corev1.ResourceName]int64{}, map[corev1.ResourceName]int64{}
	}
	for _, s := range o.Shortfalls {
		have := s.Free()
		if f.never {
			have = s.Allocatable
		}
		share := int64(-1)
		if s.Allocatable > 0 {
			share = s.Used * 100 / s.Allocatable
		}
		if _, seen := f.asked[s.Resource]; !seen {
			f.names = append(f.names, s.Resource)
			f.most[s.Resource] = have
			f.low[s.Resource], f.high[s.Resource] = share, share
		}
		f.asked[s.Resource] = s.Requested
		f.most[s.Resource] = max(f.most[s.Resource], have)
		f.low[s.Resource], f.high[s.Resource] = min(f.low[s.Resource], share), max(f.high[s.Resource], share)
	}
}

// shares says how much of each resource the group's nodes already have
// requested, "memory 97% requested" or "cpu 90-98% requested": the figure
// an operator reads first. Empty for a group that never fits (the request
// is above allocatable, whatever is in use) or has no figures.
func (f *figures) shares() string {
	if f.never || len(f.names) == 0 || slices.ContainsFunc(f.names, func(n corev1.ResourceName) bool { return f.low[n] < 0 }) {
		return ""
	}
	parts := make([]string, len(f.names))
	for i, n := range f.names {
		if lo, hi := f.low[n], f.high[n]; lo == hi {
			parts[i] = fmt.Sprintf("%s %d%% requested", n, lo)
		} else {
			parts[i] = fmt.Sprintf("%s %d-%d%% requested", n, lo, hi)
		}
	}
	return strings.Join(parts, ", ")
}

// String is " (memory: asks 256Mi, at most 120Mi free)" and the note.
func (f *figures) String() string {
	if len(f.names) == 0 {
		return f.note
	}
	have := "free"
	if f.never {
		have = "allocatable"
	}
	parts := make([]string, len(f.names))
	for i, n := range f.names {
		parts[i] = fmt.Sprintf("%s: asks %s, at most %s %s", n, quantity(n, f.asked[n]), quantity(n, max(f.most[n], 0)), have)
	}
	return " (" + strings.Join(parts, "; ") + ")" + f.note
}

// quantity prints an amount in the scheduler's units as Kubernetes writes
// it: millicores for cpu, binary suffixes for bytes, plain counts otherwise.
func quantity(name corev1.ResourceName, v int64) string {
	switch name {
	case corev1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return resource.NewQuantity(v, resource.DecimalSI).String()
}

// why says in a few words what turns the node away, the same for nodes
// that differ only in figures (so that they group), and what preemption
// makes of it.
// Reason says in a few words why the Pod does not simply fit on the node
// ("memory full (no lower-priority Pods there to preempt)"), empty when it
// does: a node's share of what Summarize says of its group, without the
// group's figures.
func (o *Outcome) Reason() string {
	why, note := o.why()
	return why + note
}

func (o *Outcome) why() (why, note string) {
	switch o.Kind {
	case Fits:
		return "", ""
	case Preempts:
		return "by preempting lower-priority Pods", ""
	}
	var parts []string
	switch o.Plugin {
	case PluginNodeResourcesFit:
		for _, s := range o.Shortfalls {
			if o.Kind == NeverFits && s.Requested > s.Allocatable {
				parts = append(parts, fmt.Sprintf("%s request above allocatable", s.Resource))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s full", s.Resource))
		}
		if len(parts) == 0 {
			parts = append(parts, strings.Join(o.Reasons, ", "))
		}
	case PluginNodePorts:
		for _, p := range o.Ports {
			parts = append(parts, "host port "+p.String()+" taken")
		}
	default:
		parts = append(parts, strings.Join(o.Reasons, ", "))
	}
	switch {
	case o.PreemptionMessage != "":
		note = " (preemptionPolicy Never: it will not preempt)"
	case o.Kind == DoesNotFit && slices.Contains(o.PreemptionReasons, ReasonNoVictims):
		note = " (no lower-priority Pods there to preempt)"
	case o.Kind == DoesNotFit && len(o.PreemptionReasons) > 0:
		note = " (preempting lower-priority Pods would not make room)"
	}
	return strings.Join(parts, ", "), note
}

// LabelsKey is labels without the label skip, in one string: key, NUL,
// value, NUL, sorted by key. Equal keys are equal label sets, so that the
// holders of the same labels can share one map.
func LabelsKey(labels map[string]string, skip string) string {
	return string(appendLabelsKey(nil, labels, skip))
}

// appendLabelsKey appends LabelsKey's key to buf: a Builder reading tens
// of thousands of nodes looks its shared map up by a buffer it reuses, and
// makes a string only for a map it has not seen.
func appendLabelsKey(buf []byte, labels map[string]string, skip string) []byte {
	var scratch [32]string
	keys := scratch[:0]
	for k := range labels {
		if k != skip {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		buf = append(append(append(append(buf, k...), 0), labels[k]...), 0)
	}
	return buf
}
