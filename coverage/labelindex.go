package coverage

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// labelIndex is what a prediction by nodeSelector reads of a snapshot's
// classes, in a few compact arrays rather than spread over each class's
// node: the classes that carry each label pair, those with a taint that can
// keep daemon Pods off, and each class's size. A snapshot builds it on its
// first such prediction (NodeSnapshot.labelIndex): it never changes after.
// It takes memory and time in proportion to the classes' labels and taints,
// whatever their number.
type labelIndex struct {
	// withLabel lists, by label pair, the classes that carry it, in
	// increasing order.
	withLabel map[labelPair][]int32
	all       []int32
	sizes     []int
	// taintList[i] numbers class i's taints among the distinct taint lists
	// of the tainted classes, taintLists; -1 for a class without a taint
	// that can keep daemon Pods off. Classes that differ in labels alone (a
	// pool's zones) share their list, and a prediction decides each list
	// once.
	taintList  []int
	taintLists [][]corev1.Taint
}

// labelIndex returns the snapshot's index, building it on first use.
func (s *NodeSnapshot) labelIndex() *labelIndex {
	s.index.once.Do(func() { s.index.idx = buildLabelIndex(s.classes) })
	return s.index.idx
}

func buildLabelIndex(classes []*nodeClass) *labelIndex {
	n := len(classes)
	idx := &labelIndex{withLabel: map[labelPair][]int32{}, all: make([]int32, n), sizes: make([]int, n),
		taintList: make([]int, n)}
	lists := map[string]int{}
	for i, c := range classes {
		idx.all[i] = int32(i)
		idx.sizes[i] = len(c.members)
		for _, l := range c.labels {
			idx.withLabel[l] = append(idx.withLabel[l], int32(i))
		}
		idx.taintList[i] = -1
		taints := c.node.Spec.Taints
		if !slices.ContainsFunc(taints, func(t corev1.Taint) bool { return excludes(&t) }) {
			continue
		}
		key := taintListKey(taints)
		l, ok := lists[key]
		if !ok {
			l = len(idx.taintLists)
			lists[key] = l
			idx.taintLists = append(idx.taintLists, taints)
		}
		idx.taintList[i] = l
	}
	return idx
}

// taintListKey is equal for two taint lists exactly when they are equal as
// Go values, TimeAdded's pointer included, so that a decision shared by
// the classes of one list is the one each would get on its own.
func taintListKey(taints []corev1.Taint) string {
	var b strings.Builder
	for _, t := range taints {
		fmt.Fprintf(&b, "%q %q %q %p;", t.Key, t.Value, t.Effect, t.TimeAdded)
	}
	return b.String()
}

// selecting returns, in increasing order, the classes whose labels hold
// every pair of selector, as a nodeSelector selects (a key present with the
// same value); without the OS and architecture pairs when relaxed. The
// result may be shared with the index: callers only read it.
func (idx *labelIndex) selecting(selector map[string]string, relaxed bool) []int32 {
	var lists [][]int32
	for k, v := range selector {
		if relaxed && IsOSArchLabel(k) {
			continue
		}
		list, ok := idx.withLabel[labelPair{k, v}]
		if !ok {
			return nil
		}
		lists = append(lists, list)
	}
	switch len(lists) {
	case 0:
		return idx.all
	case 1:
		return lists[0]
	}
	// Intersect, starting from the shortest list.
	slices.SortFunc(lists, func(a, b []int32) int { return len(a) - len(b) })
	out := slices.Clone(lists[0])
	for _, list := range lists[1:] {
		kept, j := out[:0], 0
		for _, c := range out {
			for j < len(list) && list[j] < c {
				j++
			}
			if j < len(list) && list[j] == c {
				kept = append(kept, c)
			}
		}
		out = kept
	}
	return out
}
