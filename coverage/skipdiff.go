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
// list of skips as a prediction gives them (Coverage.Skips, or a part of it
// such as Gaps: each node in one skip at most): it returns how many nodes
// now leaves out that before did not, and the first limit of them in name
// order.
//
// It holds no list of names. A run of class members that both predictions
// share (the class has not changed since, and neither has what the
// DaemonSet selects in it) names the same nodes in both, so it is not
// walked at all; the runs of now left over are merged against the runs of
// before left over, both in name order. After a node change the cost is
// the size of the classes the change touched, not of the fleet; this is what
// lets an auditor remember the skips of thousands of DaemonSets at the cost
// of their classes instead of a name per skipped node each.
func NewlySkipped(before, now []Skip, limit int) (count int, first []NewSkip) {
	old := skipRuns(before)
	shared := make([]bool, len(old))
	var fresh []nameRun
	var from []int
	for i := range now {
		for _, r := range skipRuns(now[i : i+1]) {
			if j := slices.IndexFunc(old, r.sameAs); j >= 0 {
				shared[j] = true
				continue
			}
			fresh = append(fresh, r)
			from = append(from, i)
		}
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	// A node of a fresh run is in no shared run of now (each node is in
	// one skip), so neither is it in the shared runs of before: only the
	// other runs of before can name it.
	var gone []nameRun
	for j, r := range old {
		if !shared[j] {
			gone = append(gone, r)
		}
	}
	olds := newNameStream(gone)
	oldName, _, more := olds.next()
	last := ""
	for name, run := range eachName(fresh) {
		if name == last {
			continue // a node two skips name (not a prediction's own)
		}
		last = name
		for more && oldName < name {
			oldName, _, more = olds.next()
		}
		if more && oldName == name {
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
