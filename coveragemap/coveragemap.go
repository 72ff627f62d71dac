// Package coveragemap lays DaemonSets against nodes: for every node group
// (a pool, split into classes of nodes that every DaemonSet treats alike),
// whether each DaemonSet covers it, lands there only by preempting other
// Pods, skips it and why, has its Pod Pending there (or, offline, would
// have: the scheduler's fit weighed on a cluster dump), or runs a Pod where
// it should not. `dsguard audit -o html` and
// `dsguard check --nodes … -o html` write it as one self-contained page;
// -o markdown as a compact table for a pull request.
package coveragemap

import (
	"cmp"
	"iter"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
)

// State is what one DaemonSet does on one node.
type State string

// The states of a cell.
const (
	// Covered: the DaemonSet runs there; with the Pods known, its Pod is
	// ready there.
	Covered State = "covered"
	// Pending: the DaemonSet should run there, but its Pod is missing, not
	// bound or not ready; offline, with the cluster's Pods known, the
	// scheduler would leave it Pending there (Reason says why).
	Pending State = "pending"
	// Preempts: offline, with the cluster's Pods known, the Pod lands there
	// only by evicting lower-priority Pods.
	Preempts State = "preempts"
	// Skipped: the DaemonSet does not qualify for the node (Reason says
	// why) and runs no Pod there.
	Skipped State = "skipped"
	// Misscheduled: a Pod runs on a node the DaemonSet no longer
	// qualifies for (the controller's numberMisscheduled).
	Misscheduled State = "misscheduled"
)

// PodOnNode is what the DaemonSet's Pod on one node reports.
type PodOnNode struct {
	// Bound is false for a Pod the scheduler has not bound yet.
	Bound bool
	Ready bool
}

// Agent is one DaemonSet with its predicted placement and, when known,
// its Pods by node and the controller's status.
type Agent struct {
	Namespace, Name string
	// Source is where the DaemonSet was read from (a file); it tells apart
	// DaemonSets of one name.
	Source    string
	Placement *coverage.Placement
	// Fit is what the scheduler does with the Pods on the nodes the
	// placement covers; nil unless the node set holds the cluster's Pods.
	// It is read only when Pods is nil: a Pod that exists says more.
	Fit *fit.Report
	// Pods holds the DaemonSet's Pods by node (bound or pinned there),
	// Pods being deleted left out; nil when the Pods are not known
	// (offline), and every predicted node then counts as covered.
	Pods map[string]PodOnNode
	// Status is the controller's status; nil offline.
	Status *appsv1.DaemonSetStatus
}

// Input is what a map is built from.
type Input struct {
	// Nodes are read once, one at a time.
	Nodes  iter.Seq[*corev1.Node]
	Agents []Agent
	// PoolLabel, when set, is the node label that names pools; unset,
	// the first of PoolLabels a node carries, else its role.
	PoolLabel string
	// Title says what was mapped (a cluster, a manifest set).
	Title string
}

// PoolLabels are the labels that name a node's pool on the common
// provisioners and managed clusters, in the order they are tried.
var PoolLabels = []string{
	"karpenter.sh/nodepool",
	"cloud.google.com/gke-nodepool",
	"eks.amazonaws.com/nodegroup",
	"alpha.eksctl.io/nodegroup-name",
	"kubernetes.azure.com/agentpool",
	"node.kubernetes.io/pool",
	"pool",
}

// Map is DaemonSets against node groups.
type Map struct {
	Title string `json:"title"`
	// Live is set when the Pods were known: Misscheduled only occurs
	// then. FitPredicted is set when, offline, the scheduler's fit was
	// weighed on the cluster's Pods: Pending and Preempts then say what it
	// would do.
	Live         bool     `json:"live"`
	FitPredicted bool     `json:"fitPredicted,omitempty"`
	Agents       []Column `json:"daemonSets"`
	Groups       []Group  `json:"groups"`
	Nodes        int      `json:"nodes"`
}

// Column is one DaemonSet: its name, the cells' counts in nodes, and the
// counters its status reports, when known.
type Column struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Source is where it was read from; Namesake is set when another
	// column has the same namespace and name, and the page then shows the
	// source to tell them apart.
	Source       string        `json:"source,omitempty"`
	Namesake     bool          `json:"namesake,omitempty"`
	Counts       map[State]int `json:"counts"`
	Desired      *int32        `json:"desiredNumberScheduled,omitempty"`
	Ready        *int32        `json:"numberReady,omitempty"`
	Updated      *int32        `json:"updatedNumberScheduled,omitempty"`
	Misscheduled *int32        `json:"numberMisscheduled,omitempty"`
}

// N is the count of nodes in state s.
func (c Column) N(s string) int { return c.Counts[State(s)] }

// Key is namespace/name.
func (c Column) Key() string { return c.Namespace + "/" + c.Name }

// ID is what tells the column apart from every other: its key, and its
// source when it has a namesake.
func (c Column) ID() string {
	if c.Namesake {
		return c.Key() + " (" + c.Source + ")"
	}
	return c.Key()
}

// Gaps counts its nodes in any state but covered.
func (c Column) Gaps() int {
	n := 0
	for s, k := range c.Counts {
		if s != Covered {
			n += k
		}
	}
	return n
}

// Group is a set of nodes of one pool that every DaemonSet treats alike.
type Group struct {
	Pool string `json:"pool"`
	// Traits, when another group has the same pool, are the labels and
	// taints every node of this group carries that set it apart from
	// those groups ("kubernetes.io/os=windows", "taint gpu=true:NoSchedule"),
	// at most maxTraits; NoTrait is set when none does (the nodes differ
	// in name or room only).
	Traits  []string `json:"traits,omitempty"`
	NoTrait bool     `json:"noTrait,omitempty"`
	Nodes   []string `json:"nodes"`
	// Cells holds one cell per DaemonSet, in the order of Map.Agents.
	Cells []Cell `json:"cells"`
}

// Cell is what one DaemonSet does on a group's nodes.
type Cell struct {
	State State `json:"state"`
	// Reason says why it skips the nodes, or why its Pod is Pending.
	Reason string `json:"reason,omitempty"`
}

// Build lays the agents against the nodes.
func Build(in Input) *Map {
	m := &Map{Title: in.Title, Agents: make([]Column, len(in.Agents))}
	agents := slices.Clone(in.Agents)
	slices.SortStableFunc(agents, func(a, b Agent) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name),
			strings.Compare(a.Source, b.Source))
	})
	// cellsOf[i] maps a node to agent i's cell there.
	cellsOf := make([]map[string]Cell, len(agents))
	for i := range agents {
		a := &agents[i]
		m.Live = m.Live || a.Pods != nil
		m.FitPredicted = m.FitPredicted || a.Pods == nil && a.Fit != nil
		col := Column{Namespace: a.Namespace, Name: a.Name, Source: a.Source, Counts: map[State]int{}}
		if s := a.Status; s != nil {
			col.Desired, col.Ready = &s.DesiredNumberScheduled, &s.NumberReady
			col.Updated, col.Misscheduled = &s.UpdatedNumberScheduled, &s.NumberMisscheduled
		}
		if i > 0 && m.Agents[i-1].Key() == col.Key() {
			col.Namesake, m.Agents[i-1].Namesake = true, true
		}
		m.Agents[i] = col
		cellsOf[i] = cells(a)
	}
	byKey := map[string]int{}
	var groups []*Group
	var shared []*traits
	var key strings.Builder
	for n := range in.Nodes {
		m.Nodes++
		pool := poolOf(n, in.PoolLabel)
		row := make([]Cell, len(agents))
		key.Reset()
		key.WriteString(pool)
		for i := range agents {
			c, ok := cellsOf[i][n.Name]
			if !ok {
				// A node the placement does not know (the snapshot
				// was taken apart from the node list): not judged.
				c = Cell{State: Skipped, Reason: "not in the node set the placement was predicted on"}
			}
			row[i] = c
			m.Agents[i].Counts[c.State]++
			key.WriteString("\x00" + string(c.State) + "\x00" + c.Reason)
		}
		j, ok := byKey[key.String()]
		if !ok {
			j = len(groups)
			byKey[key.String()] = j
			groups = append(groups, &Group{Pool: pool, Cells: row})
			shared = append(shared, &traits{})
		}
		groups[j].Nodes = append(groups[j].Nodes, n.Name)
		shared[j].add(n, in.PoolLabel)
	}
	nameApart(groups, shared)
	for _, g := range groups {
		slices.Sort(g.Nodes)
	}
	slices.SortFunc(groups, func(a, b *Group) int {
		return cmp.Or(strings.Compare(a.Pool, b.Pool), strings.Compare(a.Nodes[0], b.Nodes[0]))
	})
	m.Groups = make([]Group, len(groups))
	for i, g := range groups {
		m.Groups[i] = *g
	}
	return m
}

// cells is the agent's cell on every node its placement names.
func cells(a *Agent) map[string]Cell {
	out := map[string]Cell{}
	p := a.Placement
	if p == nil {
		return out
	}
	for _, node := range p.RunsOnNodes {
		out[node] = Cell{State: Covered}
		if a.Pods == nil {
			continue
		}
		switch pod, ok := a.Pods[node]; {
		case !ok:
			out[node] = Cell{State: Pending, Reason: "no Pod"}
		case !pod.Bound:
			out[node] = Cell{State: Pending, Reason: "Pod not scheduled"}
		case !pod.Ready:
			out[node] = Cell{State: Pending, Reason: "Pod not ready"}
		}
	}
	if a.Pods == nil && a.Fit != nil {
		fitCells(out, a.Fit, p.RunsOnNodes)
	}
	for _, s := range p.Skips {
		reason := s.Reason
		if s.Transient {
			reason += " (transient)"
		}
		for _, node := range s.Nodes {
			if pod, ok := a.Pods[node]; ok && pod.Bound {
				out[node] = Cell{State: Misscheduled, Reason: "runs a Pod, though " + reason}
				continue
			}
			out[node] = Cell{State: Skipped, Reason: reason}
		}
	}
	return out
}

// fitCells marks the covered nodes where, by the fit prediction, the Pod
// stays Pending or lands only by preempting; a node whose room is not known
// stays covered, as check counts it.
func fitCells(out map[string]Cell, r *fit.Report, covered []string) {
	if r.Error != "" {
		for _, node := range covered {
			out[node] = Cell{State: Pending, Reason: "no Pod can be made: " + r.Error}
		}
		return
	}
	for node, o := range r.All() {
		switch o.Kind {
		case fit.DoesNotFit, fit.NeverFits:
			out[node] = Cell{State: Pending, Reason: "the scheduler leaves it Pending: " + o.Reason()}
		case fit.Preempts:
			out[node] = Cell{State: Preempts, Reason: "lands by preempting lower-priority Pods"}
		}
	}
}

// maxTraits caps the traits a group is named by.
const maxTraits = 3

// traits gathers, for a group, the labels and taints (as the page words
// them: "k=v", "taint k=v:Effect") that every one of its nodes carries, and
// those that any of them does.
type traits struct {
	every, any map[string]bool // nil until the first node
}

func (t *traits) add(n *corev1.Node, poolLabel string) {
	if t.every == nil {
		t.every, t.any = map[string]bool{}, map[string]bool{}
		eachTrait(n, poolLabel, func(it string) { t.every[it], t.any[it] = true, true })
		return
	}
	seen := make(map[string]bool, len(t.every))
	eachTrait(n, poolLabel, func(it string) {
		t.any[it] = true
		if t.every[it] {
			seen[it] = true
		}
	})
	for it := range t.every {
		if !seen[it] {
			delete(t.every, it)
		}
	}
}

// eachTrait calls fn with each taint and label of the node, but for the
// labels that name the node or its pool, which never tell groups of one
// pool apart.
func eachTrait(n *corev1.Node, poolLabel string, fn func(string)) {
	for _, t := range n.Spec.Taints {
		if t.Value == "" {
			fn("taint " + t.Key + ":" + string(t.Effect))
		} else {
			fn("taint " + t.Key + "=" + t.Value + ":" + string(t.Effect))
		}
	}
	for k, v := range n.Labels {
		if k != corev1.LabelHostname && k != poolLabel && !slices.Contains(PoolLabels, k) {
			fn(k + "=" + v)
		}
	}
}

// sortedTraits sorts taints before labels, each by name.
func sortedTraits(items iter.Seq[string]) []string {
	return slices.SortedFunc(items, func(a, b string) int {
		return cmp.Or(-cmp.Compare(btoi(strings.HasPrefix(a, "taint ")), btoi(strings.HasPrefix(b, "taint "))), strings.Compare(a, b))
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nameApart gives each group that shares its pool with another the few
// traits that tell it from each of them, chosen greedily: what all its
// nodes carry and a sibling's do not all carry, or what all of a sibling's
// nodes carry and none of its own does ("without …"); the trait that sets
// it apart from most of the siblings not yet told apart comes first, a
// carried one before a missing one, a taint before a label.
func nameApart(groups []*Group, shared []*traits) {
	byPool := map[string][]int{}
	for i, g := range groups {
		byPool[g.Pool] = append(byPool[g.Pool], i)
	}
	type candidate struct {
		name  string
		apart []int // the siblings it tells the group from
	}
	for _, members := range byPool {
		if len(members) < 2 {
			continue
		}
		for _, i := range members {
			own := shared[i]
			var cands []candidate
			for _, it := range sortedTraits(maps.Keys(own.every)) {
				c := candidate{name: it}
				for _, j := range members {
					if j != i && !shared[j].every[it] {
						c.apart = append(c.apart, j)
					}
				}
				cands = append(cands, c)
			}
			missing := map[string][]int{}
			for _, j := range members {
				if j == i {
					continue
				}
				for it := range shared[j].every {
					if !own.any[it] {
						missing[it] = append(missing[it], j)
					}
				}
			}
			for _, it := range sortedTraits(maps.Keys(missing)) {
				cands = append(cands, candidate{name: "without " + it, apart: missing[it]})
			}
			told := map[int]bool{}
			var names []string
			for len(names) < maxTraits && len(told) < len(members)-1 {
				best, gain := -1, 0
				for k, c := range cands {
					g := 0
					for _, j := range c.apart {
						if !told[j] {
							g++
						}
					}
					if g > gain {
						best, gain = k, g
					}
				}
				if best < 0 {
					break
				}
				names = append(names, cands[best].name)
				for _, j := range cands[best].apart {
					told[j] = true
				}
			}
			groups[i].Traits, groups[i].NoTrait = names, len(names) == 0
		}
	}
}

// poolOf names the node's pool: the label asked for, else the first of
// PoolLabels it carries, else its node-role, else "(no pool)".
func poolOf(n *corev1.Node, label string) string {
	if label != "" {
		if v, ok := n.Labels[label]; ok {
			return v
		}
		return "(no " + label + ")"
	}
	for _, l := range PoolLabels {
		if v := n.Labels[l]; v != "" {
			return v
		}
	}
	var roles []string
	for k := range n.Labels {
		if role, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && role != "" {
			roles = append(roles, role)
		}
	}
	if len(roles) > 0 {
		slices.Sort(roles)
		return "role: " + strings.Join(roles, ",")
	}
	return "(no pool)"
}
