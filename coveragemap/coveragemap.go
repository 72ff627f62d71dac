// Package coveragemap lays DaemonSets against nodes: for every node group
// (a pool, split into classes of nodes that every DaemonSet treats alike),
// whether each DaemonSet covers it, skips it and why, has its Pod Pending
// there, or runs a Pod where it should not. `dsguard audit -o html` and
// `dsguard check --nodes … -o html` write it as one self-contained page;
// -o markdown as a compact table for a pull request.
package coveragemap

import (
	"cmp"
	"iter"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/coverage"
)

// State is what one DaemonSet does on one node.
type State string

// The states of a cell.
const (
	// Covered: the DaemonSet runs there; with the Pods known, its Pod is
	// ready there.
	Covered State = "covered"
	// Pending: the DaemonSet should run there, but its Pod is missing, not
	// bound or not ready.
	Pending State = "pending"
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
	Placement       *coverage.Placement
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
	// Live is set when the Pods were known: Pending and Misscheduled
	// only occur then.
	Live   bool     `json:"live"`
	Agents []Column `json:"daemonSets"`
	Groups []Group  `json:"groups"`
	Nodes  int      `json:"nodes"`
}

// Column is one DaemonSet: its name, the cells' counts in nodes, and the
// counters its status reports, when known.
type Column struct {
	Namespace    string        `json:"namespace"`
	Name         string        `json:"name"`
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

// Group is a set of nodes of one pool that every DaemonSet treats alike.
type Group struct {
	Pool  string   `json:"pool"`
	Nodes []string `json:"nodes"`
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
	slices.SortFunc(agents, func(a, b Agent) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	// cellsOf[i] maps a node to agent i's cell there.
	cellsOf := make([]map[string]Cell, len(agents))
	for i := range agents {
		a := &agents[i]
		m.Live = m.Live || a.Pods != nil
		col := Column{Namespace: a.Namespace, Name: a.Name, Counts: map[State]int{}}
		if s := a.Status; s != nil {
			col.Desired, col.Ready = &s.DesiredNumberScheduled, &s.NumberReady
			col.Updated, col.Misscheduled = &s.UpdatedNumberScheduled, &s.NumberMisscheduled
		}
		m.Agents[i] = col
		cellsOf[i] = cells(a)
	}
	byKey := map[string]*Group{}
	var groups []*Group
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
		g := byKey[key.String()]
		if g == nil {
			g = &Group{Pool: pool, Cells: row}
			byKey[key.String()] = g
			groups = append(groups, g)
		}
		g.Nodes = append(g.Nodes, n.Name)
	}
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
