package coverage

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// labelIndex is what a prediction by nodeSelector reads of a snapshot's
// classes, in a few compact arrays rather than spread over each class's
// node: the classes that carry each label pair, those with a taint that can
// keep daemon Pods off, and each class's size. A snapshot builds it on its
// first such prediction (NodeSnapshot.labelIndex): it never changes after.
type labelIndex struct {
	withLabel map[labelPair]classSet
	tainted   classSet
	all       classSet
	sizes     []int
	// taintList[i] numbers class i's taints among the distinct taint lists
	// of the tainted classes, taintLists: classes that differ in labels
	// alone (a pool's zones) share theirs, and a prediction decides each
	// list once.
	taintList  []int
	taintLists [][]corev1.Taint
}

// classSet is a set of class indices, one bit each.
type classSet []uint64

func newClassSet(n int) classSet { return make(classSet, (n+63)/64) }

func (s classSet) add(i int) { s[i/64] |= 1 << (i % 64) }

func (s classSet) has(i int) bool { return i/64 < len(s) && s[i/64]&(1<<(i%64)) != 0 }

// labelIndex returns the snapshot's index, building it on first use.
func (s *NodeSnapshot) labelIndex() *labelIndex {
	s.index.once.Do(func() { s.index.idx = buildLabelIndex(s.classes) })
	return s.index.idx
}

func buildLabelIndex(classes []*nodeClass) *labelIndex {
	n := len(classes)
	idx := &labelIndex{withLabel: map[labelPair]classSet{}, tainted: newClassSet(n), all: newClassSet(n),
		sizes: make([]int, n), taintList: make([]int, n)}
	for i, c := range classes {
		idx.all.add(i)
		idx.sizes[i] = len(c.members)
		for _, l := range c.labels {
			set, ok := idx.withLabel[l]
			if !ok {
				set = newClassSet(n)
				idx.withLabel[l] = set
			}
			set.add(i)
		}
		taints := c.node.Spec.Taints
		if !slices.ContainsFunc(taints, func(t corev1.Taint) bool { return excludes(&t) }) {
			continue
		}
		idx.tainted.add(i)
		// Equal as Go values, TimeAdded's pointer included, so that a
		// shared decision is the one each class would get on its own.
		l := slices.IndexFunc(idx.taintLists, func(ts []corev1.Taint) bool { return slices.Equal(ts, taints) })
		if l < 0 {
			l = len(idx.taintLists)
			idx.taintLists = append(idx.taintLists, taints)
		}
		idx.taintList[i] = l
	}
	return idx
}

// selecting returns the classes whose labels hold every pair of selector,
// as a nodeSelector selects (a key present with the same value); without
// the OS and architecture pairs when relaxed. The result may be shared with
// the index: callers only read it.
func (idx *labelIndex) selecting(selector map[string]string, relaxed bool) classSet {
	out, first, owned := idx.all, true, false
	for k, v := range selector {
		if relaxed && IsOSArchLabel(k) {
			continue
		}
		set, ok := idx.withLabel[labelPair{k, v}]
		switch {
		case !ok:
			return nil
		case first:
			out, first = set, false
			continue
		case !owned:
			out, owned = slices.Clone(out), true
		}
		for w := range out {
			out[w] &= set[w]
		}
	}
	return out
}
