package coverage

import (
	"cmp"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeSnapshot is an immutable view of the cluster's nodes, grouped into
// equivalence classes of nodes that look the same to the DaemonSet
// controller: same taints and same labels, apart from per-node labels, whose
// value (nearly) every node has its own of (kubernetes.io/hostname, and keys
// like an instance ID). Predictions cost one check per class, not per node,
// so a 5,000-node cluster of a few dozen node pools is as cheap as a small
// one; a DaemonSet that selects on a per-node label or a node name finds the
// nodes it names through each class's index and judges the rest of the class
// once. Build it with NewNodeSnapshot, or keep it current node by node with a
// NodeSet; share it freely.
type NodeSnapshot struct {
	// classes are never modified once the snapshot is published: a NodeSet
	// replaces the class a change touches and shares the others.
	classes []*nodeClass
	total   int
	// perNodeKeys are the per-node label keys, sorted; members hold their
	// values in this order.
	perNodeKeys []string
	// index is built on the first prediction by nodeSelector.
	index struct {
		once sync.Once
		idx  *labelIndex
	}
	// byName is built on the first Node call.
	byName struct {
		once sync.Once
		at   map[string]memberAt
	}
	// order is built on the first call that needs every name in order.
	order struct {
		once sync.Once
		o    *nameOrder
	}
	// eligible are the last lists EligibleNodes made on this snapshot.
	eligible eligibleCache
	// lifecycle is the lifecycle catalogue predictions mark skips by; nil
	// is the built-in one.
	lifecycle *Lifecycle
}

// SetLifecycle makes l (the built-in catalogue with what the cluster
// declares, see Lifecycle.With) the catalogue predictions on s mark lifecycle
// skips by. Call it before s is shared; a NodeSet's snapshots keep the
// built-in catalogue.
func (s *NodeSnapshot) SetLifecycle(l *Lifecycle) { s.lifecycle = l }

// Lifecycle returns the lifecycle catalogue predictions on s use.
func (s *NodeSnapshot) Lifecycle() *Lifecycle {
	if s.lifecycle == nil {
		return builtinLifecycle
	}
	return s.lifecycle
}

// nameOrder is every node of a snapshot in name order, and where each
// class's members stand in it: a DaemonSet's covered nodes are then found
// by marking its skipped members, not by merging the classes' names again
// and looking each up (EligibleNodes runs at every admission that weighs
// resource fit).
type nameOrder struct {
	names []string
	// at[c][i] is the position in names of member i of the class whose
	// first member is c.
	at map[*nodeMember][]int32
}

// positions returns where the members of r's class stand in the order;
// false when r is not a run of one of the snapshot's classes.
func (o *nameOrder) positions(r *nameRun) ([]int32, bool) {
	if len(r.members) == 0 {
		return nil, true
	}
	at, ok := o.at[&r.members[0]]
	return at, ok && len(at) == len(r.members)
}

// sorted returns the snapshot's name order, building it once.
func (s *NodeSnapshot) sorted() *nameOrder {
	s.order.once.Do(func() {
		runs := make([]nameRun, len(s.classes))
		o := &nameOrder{names: make([]string, 0, s.total), at: make(map[*nodeMember][]int32, len(s.classes))}
		for i, c := range s.classes {
			runs[i] = nameRun{members: c.members}
			if len(c.members) > 0 {
				o.at[&c.members[0]] = make([]int32, len(c.members))
			}
		}
		// A run yields its members in order: next[r] is the member of run r
		// that comes next.
		next := make([]int32, len(runs))
		for name, run := range eachName(runs) {
			o.at[&runs[run].members[0]][next[run]] = int32(len(o.names))
			next[run]++
			o.names = append(o.names, name)
		}
		s.order.o = o
	})
	return s.order.o
}

// memberAt is where a node is: its class and its position there.
type memberAt struct{ class, member int32 }

// Node returns the node named name as the snapshot holds it (name, labels
// and taints), or nil. The node is the caller's own.
func (s *NodeSnapshot) Node(name string) *corev1.Node {
	s.byName.once.Do(func() {
		s.byName.at = make(map[string]memberAt, s.total)
		for i, c := range s.classes {
			for j, m := range c.members {
				s.byName.at[m.name] = memberAt{int32(i), int32(j)}
			}
		}
	})
	at, ok := s.byName.at[name]
	if !ok {
		return nil
	}
	return s.member(s.classes[at.class], int(at.member))
}

// member builds member i of class c.
func (s *NodeSnapshot) member(c *nodeClass, i int) *corev1.Node {
	n := s.memberNode(c)
	s.setMember(&n, c.members[i].name, c.valuesOf(i))
	n.Spec.Taints = slices.Clone(n.Spec.Taints)
	return &n
}

// All yields every node, class by class, each built as Node builds it: a
// reader of many nodes holds one at a time.
func (s *NodeSnapshot) All() iter.Seq[*corev1.Node] {
	return func(yield func(*corev1.Node) bool) {
		for _, c := range s.classes {
			for i := range c.members {
				if !yield(s.member(c, i)) {
					return
				}
			}
		}
	}
}

type nodeClass struct {
	// key is the class's canonical encoding (writeClassKey).
	key string
	// node carries the class's shared labels and taints; Name and the
	// per-node labels are set per member only when a DaemonSet looks at them.
	node corev1.Node
	// labels lists node.Labels, for NodeSet.Holds: ranging over a slice
	// costs less than over a map, and Holds runs for every Node update.
	labels  []labelPair
	members []nodeMember // sorted by name
	// values holds the members' values of NodeSnapshot.perNodeKeys, one
	// run of len(perNodeKeys) per member in member order (valuesOf): one
	// array per class rather than a slice per node.
	values []perNodeValue
	// byValue[j] lists, as indices into members, the members that carry
	// perNodeKeys[j], sorted by value then name: the index per-node
	// selectors are answered from.
	byValue [][]int32
	// labelMaps are label maps holding the class's labels, for
	// borrowMemberNode.
	labelMaps sync.Pool
}

type labelPair struct{ key, value string }

type nodeMember struct {
	name string
}

type perNodeValue struct {
	value string
	// present tells an absent label from an empty value.
	present bool
}

// valuesOf returns member i's values of the per-node keys.
func (c *nodeClass) valuesOf(i int) []perNodeValue {
	k := len(c.byValue)
	return c.values[i*k : (i+1)*k : (i+1)*k]
}

// A label key is per-node when it has at least this many distinct values and
// more than one per perNodeRatio nodes: splitting classes by it would make
// nearly every node a class of its own.
const (
	perNodeMinValues = 32
	perNodeRatio     = 8
)

// perNodeKeysOf returns the hostname label and every high-cardinality key.
func perNodeKeysOf(nodes []NodeRecord) []string {
	values := map[string]map[string]struct{}{}
	for i := range nodes {
		for k, v := range nodes[i].labels() {
			vs, ok := values[k]
			if !ok {
				vs = map[string]struct{}{}
				values[k] = vs
			}
			vs[v] = struct{}{}
		}
	}
	keys := []string{corev1.LabelHostname}
	for k, vs := range values {
		if k != corev1.LabelHostname && len(vs) >= perNodeMinValues && len(vs)*perNodeRatio > len(nodes) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func (s *NodeSnapshot) isPerNodeKey(k string) bool {
	_, found := slices.BinarySearch(s.perNodeKeys, k)
	return found
}

// NodeRecord is what a snapshot reads of a node: its name, labels and
// taints. Records of nodes alike may share one label map and one taint
// list, with the hostname label left out of the map and held in Hostname:
// a reader of a large node list then keeps little more per node than its
// name (NewNodeSnapshotOf).
type NodeRecord struct {
	Name   string
	Labels map[string]string
	// Hostname, when set, is the kubernetes.io/hostname label, which
	// Labels then leaves out.
	Hostname string
	Taints   []corev1.Taint
}

// RecordOf is the record of a node, sharing its maps.
func RecordOf(n *corev1.Node) NodeRecord {
	return NodeRecord{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints}
}

// label returns the value of label key.
func (r *NodeRecord) label(key string) (string, bool) {
	if key == corev1.LabelHostname && r.Hostname != "" {
		return r.Hostname, true
	}
	v, ok := r.Labels[key]
	return v, ok
}

// labels yields every label, the hostname included.
func (r *NodeRecord) labels() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if r.Hostname != "" && !yield(corev1.LabelHostname, r.Hostname) {
			return
		}
		for k, v := range r.Labels {
			if !yield(k, v) {
				return
			}
		}
	}
}

// NewNodeSnapshot groups nodes into classes. Only names, labels and taints are
// read and kept, so the caller may strip everything else before.
func NewNodeSnapshot(nodes []*corev1.Node) *NodeSnapshot {
	recs := make([]NodeRecord, len(nodes))
	for i, n := range nodes {
		recs[i] = RecordOf(n)
	}
	return NewNodeSnapshotOf(recs)
}

// NewNodeSnapshotOf groups the nodes of records into classes. It keeps
// neither the records nor their maps.
func NewNodeSnapshotOf(nodes []NodeRecord) *NodeSnapshot {
	s := &NodeSnapshot{total: len(nodes), perNodeKeys: perNodeKeysOf(nodes)}
	index := map[string]int{}
	var byClass [][]*NodeRecord
	for j := range nodes {
		n := &nodes[j]
		key := s.classKey(n)
		i, ok := index[key]
		if !ok {
			i = len(s.classes)
			index[key] = i
			s.classes = append(s.classes, s.newClass(key, n))
			byClass = append(byClass, nil)
		}
		byClass[i] = append(byClass[i], n)
	}
	k := len(s.perNodeKeys)
	for i, c := range s.classes {
		members := byClass[i]
		slices.SortFunc(members, func(a, b *NodeRecord) int { return strings.Compare(a.Name, b.Name) })
		c.members = make([]nodeMember, len(members))
		c.values = make([]perNodeValue, len(members)*k)
		for m, n := range members {
			c.members[m].name = n.Name
			s.readValues(c.values[m*k:(m+1)*k], n)
		}
		s.indexValues(c)
	}
	return s
}

// newClass returns an empty class with n's shared labels and taints (copies:
// the snapshot must not change when the informer replaces n).
func (s *NodeSnapshot) newClass(key string, n *NodeRecord) *nodeClass {
	labels := make(map[string]string, len(n.Labels))
	for k, v := range n.labels() {
		if !s.isPerNodeKey(k) {
			labels[k] = v
		}
	}
	c := &nodeClass{key: key, labels: make([]labelPair, 0, len(labels))}
	for k, v := range labels {
		c.labels = append(c.labels, labelPair{k, v})
	}
	c.node.Labels = labels
	c.node.Spec.Taints = append([]corev1.Taint(nil), n.Taints...)
	return c
}

// memberNode returns a copy of class's node with a label map of its own,
// for setMember to make it stand for one member after another without
// touching the class.
func (s *NodeSnapshot) memberNode(class *nodeClass) corev1.Node {
	node := class.node
	node.Labels = make(map[string]string, len(node.Labels)+len(s.perNodeKeys))
	maps.Copy(node.Labels, class.node.Labels)
	return node
}

// borrowMemberNode is memberNode with a label map from the class's pool,
// which already holds the class's labels: copying them was most of the cost
// of a prediction that judges members one by one. setMember rewrites every
// per-node label, so what the map held before does not matter. Give the map
// back with giveBack.
func (s *NodeSnapshot) borrowMemberNode(class *nodeClass) corev1.Node {
	if labels, ok := class.labelMaps.Get().(map[string]string); ok {
		node := class.node
		node.Labels = labels
		return node
	}
	return s.memberNode(class)
}

// giveBack returns the label map of a node from borrowMemberNode.
func (c *nodeClass) giveBack(node *corev1.Node) { c.labelMaps.Put(node.Labels) }

// setMember makes node (from memberNode) the member called name, whose
// per-node label values are values.
func (s *NodeSnapshot) setMember(node *corev1.Node, name string, values []perNodeValue) {
	node.Name = name
	for j, k := range s.perNodeKeys {
		if values[j].present {
			node.Labels[k] = values[j].value
		} else {
			delete(node.Labels, k)
		}
	}
}

// readValues fills values with n's values of the per-node keys.
func (s *NodeSnapshot) readValues(values []perNodeValue, n *NodeRecord) {
	for j, k := range s.perNodeKeys {
		v, ok := n.label(k)
		if v == n.Name {
			// The hostname is often the name: one string serves both.
			v = n.Name
		}
		values[j].value, values[j].present = v, ok
	}
}

// valuesFor returns n's values of the per-node keys.
func (s *NodeSnapshot) valuesFor(n *NodeRecord) []perNodeValue {
	values := make([]perNodeValue, len(s.perNodeKeys))
	s.readValues(values, n)
	return values
}

// indexValues builds c.byValue from c.members and c.values.
func (s *NodeSnapshot) indexValues(c *nodeClass) {
	k := len(s.perNodeKeys)
	c.byValue = make([][]int32, k)
	for j := range k {
		idx := make([]int32, 0, len(c.members))
		for i := range c.members {
			if c.values[i*k+j].present {
				idx = append(idx, int32(i))
			}
		}
		// Members are in name order: a stable sort by value leaves
		// those of one value in name order.
		slices.SortStableFunc(idx, func(a, b int32) int {
			return strings.Compare(c.values[int(a)*k+j].value, c.values[int(b)*k+j].value)
		})
		c.byValue[j] = idx
	}
}

// compareAt orders members a and b by their value of per-node key j, then
// by name (their order in members).
func (c *nodeClass) compareAt(j int, a, b int32) int {
	k := len(c.byValue)
	if x := strings.Compare(c.values[int(a)*k+j].value, c.values[int(b)*k+j].value); x != 0 {
		return x
	}
	return cmp.Compare(a, b)
}

// find returns the index of the member named name, and whether it exists.
func (c *nodeClass) find(name string) (int, bool) {
	return slices.BinarySearchFunc(c.members, name, func(m nodeMember, n string) int { return strings.Compare(m.name, n) })
}

// withValue returns the indices of the members whose perNodeKeys[j] is
// value, in name order.
func (c *nodeClass) withValue(j int, value string) []int32 {
	idx := c.byValue[j]
	k := len(c.byValue)
	valueAt := func(x int) string { return c.values[int(idx[x])*k+j].value }
	lo, _ := slices.BinarySearchFunc(idx, value, func(i int32, v string) int { return strings.Compare(c.values[int(i)*k+j].value, v) })
	hi := lo
	for hi < len(idx) && valueAt(hi) == value {
		hi++
	}
	return idx[lo:hi]
}

// StripNode returns a copy of n with only what the prediction reads: name,
// labels, taints and cordon. The node view's reflector applies it to the
// nodes a streamed list collects before they are handed over, so that the
// list holds no images, conditions, managed fields or annotations. Label
// keys and values are interned: every node decoded from the API server has
// its own copy of the same dozen keys and of its zone, instance type and
// pool, which one copy serves.
func StripNode(n *corev1.Node) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: internLabels(n.Labels)},
		Spec:       corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
	}
}

// internLabels returns labels with its keys and shared values interned
// with unique.Make. The sharing is partial: unique keeps a canonical copy
// only while a Handle to it lives, and the nodes keep the strings, not the
// handles, so nodes decoded after a garbage collection start new copies.
// That still removes most duplicates of an initial list or a burst of
// updates, and pins nothing that no node uses. The hostname's value is each
// node's own: interning it would only add an entry.
func internLabels(labels map[string]string) map[string]string {
	if labels == nil {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if k != corev1.LabelHostname {
			v = unique.Make(v).Value()
		}
		out[unique.Make(k).Value()] = v
	}
	return out
}

// classKey returns a canonical encoding of the node's labels (without the
// per-node labels) and taints. Taint order is kept: the controller reports
// the first untolerated taint, so order is part of what a class predicts.
func (s *NodeSnapshot) classKey(n *NodeRecord) string {
	keys := make([]string, 0, len(n.Labels)+1)
	for k := range n.labels() {
		if !s.isPerNodeKey(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v, _ := n.label(k)
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte(0)
	}
	b.WriteByte(1)
	for _, t := range n.Taints {
		b.WriteString(t.Key)
		b.WriteByte('=')
		b.WriteString(t.Value)
		b.WriteByte(':')
		b.WriteString(string(t.Effect))
		b.WriteByte(0)
	}
	return b.String()
}

// Len returns the number of nodes.
func (s *NodeSnapshot) Len() int { return s.total }

// Classes returns the number of equivalence classes.
func (s *NodeSnapshot) Classes() int { return len(s.classes) }

// Names returns every node name, sorted.
func (s *NodeSnapshot) Names() []string { return slices.Clone(s.sorted().names) }

// HasTaint reports whether any node carries a taint with this key and effect
// (and value, when value is not empty).
func (s *NodeSnapshot) HasTaint(key, value string, effect corev1.TaintEffect) bool {
	for _, c := range s.classes {
		if carriesTaint(c.node.Spec.Taints, key, value, effect) {
			return true
		}
	}
	return false
}

// LabelValues returns, by node name, the value of label key on each node of
// the snapshot that has it (a topology domain, such as a zone). It builds
// every node once: a caller asks only when a domain other than the node
// itself matters.
func (s *NodeSnapshot) LabelValues(key string) map[string]string {
	out := map[string]string{}
	for _, n := range s.nodes() {
		if v, ok := n.Labels[key]; ok {
			out[n.Name] = v
		}
	}
	return out
}
