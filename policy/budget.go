package policy

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/coverage"
)

// Limits on the placement dsguard judges. A DaemonSet's required node
// affinity may hold thousands of terms within the API server's size limits,
// and a prediction tests every term against every node (or class of nodes):
// unbounded, one object costs seconds of CPU on every request, dry-runs
// included. Beyond these limits dsguard does not predict at all and the
// placement-size rule denies, in milliseconds.
const (
	// MaxAffinityTerms caps the node selector terms of a placement.
	MaxAffinityTerms = 1000
	// MaxAffinityValues caps the values of all its requirements.
	MaxAffinityValues = 10000
	// MaxPredictionWork caps requirements × placement decisions (nodes, or
	// classes of nodes, examined): about 100 ms of CPU.
	MaxPredictionWork = 500_000
)

// PlacementTooLarge says why ds's placement is too large to judge, "" when
// it is not: too many terms or values, or, with nodes, too much work for
// the nodes it would be tested against. It is judged once per DaemonSet and
// snapshot (see Env.Coverage), however many rules and callers ask.
func (env *Env) PlacementTooLarge(ds *appsv1.DaemonSet) string { return env.judged(ds).tooLarge }

// PredictionWork is the work a prediction of ds costs on env's nodes, in
// requirements × placement decisions; 0 without nodes, and 0 for a
// placement over the term or value caps, which is never predicted.
func (env *Env) PredictionWork(ds *appsv1.DaemonSet) int { return env.judged(ds).work }

// judgeSize measures ds's placement against the limits.
func judgeSize(ds *appsv1.DaemonSet, nodes *coverage.NodeSnapshot) (tooLarge string, work int) {
	spec := &ds.Spec.Template.Spec
	size := coverage.SizeOf(spec)
	switch {
	case size.Terms > MaxAffinityTerms:
		return fmt.Sprintf("affinity too large to judge: %d terms; limit %d", size.Terms, MaxAffinityTerms), 0
	case size.Values > MaxAffinityValues:
		return fmt.Sprintf("affinity too large to judge: %d values; limit %d", size.Values, MaxAffinityValues), 0
	case nodes == nil:
		return "", 0
	}
	examined := nodes.NodesExamined(spec)
	if work := size.Requirements * examined; work > MaxPredictionWork {
		tooLarge = fmt.Sprintf("affinity too large to judge against %d nodes: %d requirements × %d node checks; limit %d",
			nodes.Len(), size.Requirements, examined, MaxPredictionWork)
	}
	return tooLarge, max(size.Requirements, 1) * examined
}

// DescribeNodes lists total nodes by name, at most limit of them and then
// "and N more"; with HideNodeNames it only counts them. names are the first
// names in order, at least min(total, limit) of them (coverage.Skip's
// FirstNodes), so that a caller never builds the names it does not show.
func (env *Env) DescribeNodes(names []string, total, limit int) string {
	switch {
	case env.HideNodeNames && total == 1:
		return "1 node"
	case env.HideNodeNames:
		return strconv.Itoa(total) + " nodes"
	case total <= limit:
		return strings.Join(names[:total], ", ")
	}
	return strings.Join(names[:limit], ", ") + " and " + strconv.Itoa(total-limit) + " more"
}

// DescribeSkip is a skip's reason followed by its nodes, as DescribeNodes
// gives them.
func (env *Env) DescribeSkip(s coverage.Skip, limit int) string {
	var names []string
	if !env.HideNodeNames {
		// Merging the class members into sorted names is most of the
		// cost, and wasted on a caller who is only told how many.
		names = s.FirstNodes(limit)
	}
	return s.Reason() + " (" + env.DescribeNodes(names, s.Count, limit) + ")"
}
