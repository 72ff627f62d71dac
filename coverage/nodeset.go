package coverage

import (
	"iter"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// NodeSet keeps a NodeSnapshot current node by node, as a node watch
// reports changes: a node's old class loses it and its new class gains it, and
// the snapshot of the set is replaced by one that shares every other class
// (copy on write), so a change costs the size of the two classes it touches,
// not a rebuild, and readers of a published snapshot never need a lock.
// A NodeSet is for one writer at a time.
type NodeSet struct {
	snap *NodeSnapshot
	// index maps each class key to its slot: the class's position in
	// snap.classes.
	index map[string]*classSlot
	// where maps each node's name (the member's own string) to its class's
	// slot, so that telling whether an update changes anything (Holds)
	// costs one lookup, not a search of every class: a node view holds no
	// copy of the nodes to compare an update with. Slots, not positions,
	// so that a class moving in snap.classes updates one slot, not an
	// entry per member.
	where map[string]*classSlot
	// builtClasses is the class count at the last full build: when changes
	// multiply the classes (a new label with a value per node), the set is
	// rebuilt so that the label counts as per-node.
	builtClasses int
}

// NewNodeSet returns a set holding nodes (see NewNodeSnapshot).
func NewNodeSet(nodes []*corev1.Node) *NodeSet {
	s := &NodeSet{}
	s.build(NewNodeSnapshot(nodes))
	return s
}

// classSlot holds a class's position in NodeSet.snap.classes.
type classSlot struct{ at int }

func (s *NodeSet) build(snap *NodeSnapshot) {
	s.snap = snap
	s.index = make(map[string]*classSlot, len(snap.classes))
	s.where = make(map[string]*classSlot, snap.total)
	for i, c := range snap.classes {
		slot := &classSlot{at: i}
		s.index[c.key] = slot
		for _, m := range c.members {
			s.where[m.name] = slot
		}
	}
	s.builtClasses = len(snap.classes)
}

// Snapshot returns the current snapshot; later changes never modify it.
func (s *NodeSet) Snapshot() *NodeSnapshot { return s.snap }

// locate returns the class holding the node named name and its position
// there.
func (s *NodeSet) locate(name string) (*nodeClass, int, bool) {
	slot, ok := s.where[name]
	if !ok {
		return nil, 0, false
	}
	c := s.snap.classes[slot.at]
	i, ok := c.find(name)
	return c, i, ok
}

// Holds reports whether the set holds n as it is: a node of that name with
// the same labels and taints (what a prediction reads; a taint's TimeAdded
// is not part of it). It builds nothing, so an update that changes nothing
// a prediction reads (a heartbeat, a condition, an annotation) costs a
// lookup and a comparison.
func (s *NodeSet) Holds(n *corev1.Node) bool {
	c, i, ok := s.locate(n.Name)
	if !ok || !sameTaints(c.node.Spec.Taints, n.Spec.Taints) {
		return false
	}
	labels := len(c.labels)
	for j, v := range c.valuesOf(i) {
		got, present := n.Labels[s.snap.perNodeKeys[j]]
		if present != v.present || got != v.value {
			return false
		}
		if present {
			labels++
		}
	}
	if len(n.Labels) != labels {
		return false
	}
	for _, l := range c.labels {
		if got, ok := n.Labels[l.key]; !ok || got != l.value {
			return false
		}
	}
	return true
}

// sameTaints compares taints as a prediction reads them: key, value and
// effect, in order (TimeAdded is when the node lifecycle controller added a
// NoExecute taint, no part of a prediction).
func sameTaints(a, b []corev1.Taint) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.Taint) bool {
		return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect
	})
}

// Node returns the node named name as the set holds it (name, labels and
// taints), or nil when the set has no such node. The node is the caller's:
// its label map and taints are its own, not the published snapshot's.
func (s *NodeSet) Node(name string) *corev1.Node {
	c, i, ok := s.locate(name)
	if !ok {
		return nil
	}
	return s.snap.member(c, i)
}

// Apply adds the node or replaces the node of the same name. It returns the
// classes the node left and joined ("" when it was not there before), and
// whether anything a prediction reads changed; when nothing did, the
// snapshot stays as it was.
func (s *NodeSet) Apply(n *corev1.Node) (from, to string, changed bool) {
	snap := s.snap
	rec := RecordOf(n)
	to = snap.classKey(&rec)
	values := snap.valuesFor(&rec)
	c, at, known := s.locate(n.Name)
	if known {
		from = c.key
		if from == to && slices.Equal(c.valuesOf(at), values) {
			return from, to, false
		}
	}
	next := &NodeSnapshot{classes: slices.Clone(snap.classes), total: snap.total, perNodeKeys: snap.perNodeKeys}
	if known {
		s.removeMember(next, from, at)
	} else {
		next.total++
	}
	s.addMember(next, to, &rec, values)
	s.publish(next)
	return from, to, true
}

// Remove deletes the node named name. It returns the class it left and
// whether it was there.
func (s *NodeSet) Remove(name string) (from string, changed bool) {
	c, at, known := s.locate(name)
	if !known {
		return "", false
	}
	next := &NodeSnapshot{classes: slices.Clone(s.snap.classes), total: s.snap.total - 1, perNodeKeys: s.snap.perNodeKeys}
	s.removeMember(next, c.key, at)
	s.publish(next)
	return c.key, true
}

// ClassNode returns the node the class with this key stands for (its shared
// labels and taints, no name), or nil when the current snapshot has no such
// class. Keys come from Apply and Remove.
func (s *NodeSet) ClassNode(key string) *corev1.Node {
	if slot, ok := s.index[key]; ok {
		return &s.snap.classes[slot.at].node
	}
	return nil
}

// removeMember replaces the class with this key by a copy without its
// member at position at.
func (s *NodeSet) removeMember(next *NodeSnapshot, key string, at int) {
	i := s.index[key].at
	old := next.classes[i]
	delete(s.where, old.members[at].name)
	if len(old.members) == 1 {
		// The class is gone: the last class takes its place.
		last := len(next.classes) - 1
		moved := next.classes[last]
		next.classes[i] = moved
		next.classes = next.classes[:last]
		delete(s.index, key)
		if i != last {
			s.index[moved.key].at = i
		}
		return
	}
	k := len(old.byValue)
	c := &nodeClass{key: old.key, node: old.node, labels: old.labels,
		members: slices.Delete(slices.Clone(old.members), at, at+1),
		values:  slices.Delete(slices.Clone(old.values), at*k, (at+1)*k),
		byValue: make([][]int32, k),
	}
	for j, idx := range old.byValue {
		out := make([]int32, 0, len(idx))
		for _, m := range idx {
			switch {
			case int(m) < at:
				out = append(out, m)
			case int(m) > at:
				out = append(out, m-1)
			}
		}
		c.byValue[j] = out
	}
	next.classes[i] = c
}

// addMember replaces the class with this key by a copy with n as a member
// (values its per-node values), or adds the class.
func (s *NodeSet) addMember(next *NodeSnapshot, key string, n *NodeRecord, values []perNodeValue) {
	m := nodeMember{name: n.Name}
	slot, ok := s.index[key]
	if !ok {
		c := next.newClass(key, n)
		c.members = []nodeMember{m}
		c.values = values
		next.indexValues(c)
		slot = &classSlot{at: len(next.classes)}
		s.index[key] = slot
		s.where[m.name] = slot
		next.classes = append(next.classes, c)
		return
	}
	s.where[m.name] = slot
	i := slot.at
	old := next.classes[i]
	at, _ := old.find(m.name)
	k := len(old.byValue)
	c := &nodeClass{key: old.key, node: old.node, labels: old.labels,
		members: slices.Insert(slices.Clone(old.members), at, m),
		values:  slices.Insert(slices.Clone(old.values), at*k, values...),
		byValue: make([][]int32, k),
	}
	for j, idx := range old.byValue {
		out := make([]int32, len(idx), len(idx)+1)
		for x, m := range idx {
			if int(m) >= at {
				m++
			}
			out[x] = m
		}
		if values[j].present {
			pos, _ := slices.BinarySearchFunc(out, int32(at), func(e, t int32) int { return c.compareAt(j, e, t) })
			out = slices.Insert(out, pos, int32(at))
		}
		c.byValue[j] = out
	}
	next.classes[i] = c
}

func (s *NodeSet) publish(next *NodeSnapshot) {
	if n := len(next.classes); n > 2*max(s.builtClasses, perNodeMinValues) {
		s.build(NewNodeSnapshot(next.nodes()))
		return
	}
	s.snap = next
}

// nodes returns the snapshot's nodes as NewNodeSnapshot reads them.
func (s *NodeSnapshot) nodes() []*corev1.Node {
	out := make([]*corev1.Node, 0, s.total)
	for _, c := range s.classes {
		for i, m := range c.members {
			n := s.memberNode(c)
			s.setMember(&n, m.name, c.valuesOf(i))
			out = append(out, &n)
		}
	}
	return out
}

// nameRun is a sorted run of node names: the members of one class, only
// those at the indices of only, or all but those at the indices of except
// (both sorted).
type nameRun struct {
	members      []nodeMember
	only, except []int32
}

func (r *nameRun) len() int {
	switch {
	case r.only != nil:
		return len(r.only)
	default:
		return len(r.members) - len(r.except)
	}
}

// each calls f with the index of each member the run names, in order.
func (r *nameRun) each(f func(i int32)) {
	if r.only != nil {
		for _, i := range r.only {
			f(i)
		}
		return
	}
	skip := 0
	for i := range int32(len(r.members)) {
		if skip < len(r.except) && r.except[skip] == i {
			skip++
			continue
		}
		f(i)
	}
}

// runCursor walks a nameRun.
type runCursor struct {
	run     *nameRun
	at      int // the run's index
	i, skip int
	name    string
}

// advance moves to the next name; false at the end.
func (c *runCursor) advance() bool {
	r := c.run
	if r.only != nil {
		if c.i >= len(r.only) {
			return false
		}
		c.name = r.members[r.only[c.i]].name
		c.i++
		return true
	}
	for c.skip < len(r.except) && int(r.except[c.skip]) == c.i {
		c.i++
		c.skip++
	}
	if c.i >= len(r.members) {
		return false
	}
	c.name = r.members[c.i].name
	c.i++
	return true
}

// mergeRuns returns the first limit names of runs in order (fewer when the
// runs hold fewer).
func mergeRuns(runs []nameRun, limit int) []string {
	out := make([]string, 0, max(limit, 0))
	if limit <= 0 {
		return out
	}
	for name := range eachName(runs) {
		out = append(out, name)
		if len(out) == limit {
			break
		}
	}
	return out
}

// eachName yields the names of runs in order, each with the index of the run
// it comes from.
func eachName(runs []nameRun) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		s := newNameStream(runs)
		for {
			name, run, ok := s.next()
			if !ok || !yield(name, run) {
				return
			}
		}
	}
}

// nameStream merges runs into one stream of names in order: a binary heap
// of cursors, written out rather than through container/heap, since this is
// the inner loop of every list of skipped nodes.
type nameStream struct {
	cursors []runCursor
	h       []*runCursor
}

func newNameStream(runs []nameRun) *nameStream {
	s := &nameStream{cursors: make([]runCursor, len(runs)), h: make([]*runCursor, 0, len(runs))}
	for i := range runs {
		c := &s.cursors[i]
		c.run, c.at = &runs[i], i
		if c.advance() {
			s.h = append(s.h, c)
		}
	}
	for i := len(s.h)/2 - 1; i >= 0; i-- {
		siftDown(s.h, i)
	}
	return s
}

// next returns the next name and the index of its run; false at the end.
func (s *nameStream) next() (name string, run int, ok bool) {
	if len(s.h) == 0 {
		return "", 0, false
	}
	top := s.h[0]
	name, run = top.name, top.at
	if !top.advance() {
		s.h[0] = s.h[len(s.h)-1]
		s.h = s.h[:len(s.h)-1]
	}
	if len(s.h) > 1 {
		siftDown(s.h, 0)
	}
	return name, run, true
}

func siftDown(h []*runCursor, i int) {
	for {
		least := i
		if l := 2*i + 1; l < len(h) && h[l].name < h[least].name {
			least = l
		}
		if r := 2*i + 2; r < len(h) && h[r].name < h[least].name {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}
