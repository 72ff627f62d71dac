package coverage

import (
	"slices"
	"strings"
	"unsafe"
)

// NewSkip is one node that a prediction skips and an earlier one did not.
type NewSkip struct {
	Name string
	// Skip is the index, in the later prediction's skips, of the skip
	// that leaves the node out (its reason).
	Skip int
}

// NewlySkipped compares the nodes two predictions skip, each given as a
// list of skips (Coverage.Skips, or a part of it such as Gaps): it returns
// how many nodes now leaves out that before did not, and the first limit of
// them in name order.
//
// It holds no list of names. A run of class members that both predictions
// share (the class has not changed since, and neither has what the
// DaemonSet selects in it) is not walked at all, so after a node change the
// cost is the size of the classes the change touched, not of the fleet; this
// is what lets an auditor remember the skips of thousands of DaemonSets at
// the cost of their classes instead of a name per skipped node each.
func NewlySkipped(before, now []Skip, limit int) (count int, first []NewSkip) {
	old := skipRuns(before)
	var fresh []nameRun
	var from []int
	for i := range now {
		for _, r := range skipRuns(now[i : i+1]) {
			if !slices.ContainsFunc(old, r.sameAs) {
				fresh = append(fresh, r)
				from = append(from, i)
			}
		}
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	last := ""
	for name, run := range eachName(fresh) {
		if name == last {
			continue // a node two skips name (not a prediction's own)
		}
		last = name
		if slices.ContainsFunc(old, func(r nameRun) bool { return r.contains(name) }) {
			continue
		}
		count++
		if len(first) < limit {
			first = append(first, NewSkip{Name: name, Skip: from[run]})
		}
	}
	return count, first
}

// skipRuns returns the runs of names of skips. A skip that names its nodes
// outright (WithNodes) becomes one run of its own.
func skipRuns(skips []Skip) []nameRun {
	var out []nameRun
	for _, s := range skips {
		if s.runs != nil {
			out = append(out, s.runs...)
			continue
		}
		if len(s.names) == 0 {
			continue
		}
		members := make([]nodeMember, len(s.names))
		for i, n := range s.names {
			members[i] = nodeMember{name: n}
		}
		slices.SortFunc(members, func(a, b nodeMember) int { return strings.Compare(a.name, b.name) })
		out = append(out, nameRun{members: members})
	}
	return out
}

// sameAs reports whether r and o are one run: the same members (the same
// class, unchanged: a changed class is a copy with members of its own) with
// the same selection among them.
func (r nameRun) sameAs(o nameRun) bool {
	return len(r.members) == len(o.members) &&
		unsafe.SliceData(r.members) == unsafe.SliceData(o.members) &&
		(r.only == nil) == (o.only == nil) &&
		slices.Equal(r.only, o.only) && slices.Equal(r.except, o.except)
}

// contains reports whether the run names the node.
func (r nameRun) contains(name string) bool {
	i, ok := slices.BinarySearchFunc(r.members, name, func(m nodeMember, n string) int { return strings.Compare(m.name, n) })
	if !ok {
		return false
	}
	if r.only != nil {
		_, in := slices.BinarySearch(r.only, int32(i))
		return in
	}
	_, out := slices.BinarySearch(r.except, int32(i))
	return !out
}
