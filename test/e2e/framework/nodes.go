package framework

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Node describes a node to create.
type Node struct {
	Name string
	// Labels are added to kubernetes.io/hostname (the name),
	// kubernetes.io/os (linux) and kubernetes.io/arch (amd64), and replace
	// them where they name the same key.
	Labels map[string]string
	// Taints in kubectl's form, e.g. "node-role.kubernetes.io/control-plane:NoSchedule".
	Taints []string
}

// SmallCluster is the node set the scenarios model: one tainted control-plane
// node and three workers, one of them a GPU node.
var SmallCluster = []Node{
	{Name: "cp-1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""},
		Taints: []string{"node-role.kubernetes.io/control-plane:NoSchedule"}},
	{Name: "worker-1"},
	{Name: "worker-2"},
	{Name: "worker-3", Labels: map[string]string{"gpu": "true"}},
}

// CreateNodes creates the nodes with kubectl and makes them ready as far as
// scheduling goes: the API server's admission adds
// node.kubernetes.io/not-ready:NoSchedule to every new Node (a kubelet's node
// lifecycle controller would lift it), and daemon Pods do not tolerate it.
func (c *Cluster) CreateNodes(ctx context.Context, nodes []Node) error {
	if len(nodes) == 0 {
		return nil
	}
	var b strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels:\n", n.Name)
		// The kubelet's labels, unless the node sets its own.
		labels := map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
		maps.Copy(labels, n.Labels)
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			fmt.Fprintf(&b, "    %s: %q\n", k, labels[k])
		}
	}
	if r := c.Kubectl(ctx, b.String(), "create", "-f", "-"); r.Err != nil {
		return r.Error()
	}
	for _, n := range nodes {
		// Only the removal may find nothing to remove (the taint is
		// already gone); the requested taints are applied apart, so an
		// error there is never mistaken for that.
		if r := c.Kubectl(ctx, "", "taint", "nodes", n.Name, notReadyTaint+"-"); r.Err != nil &&
			!strings.Contains(r.Stderr, fmt.Sprintf("taint %q not found", notReadyTaint)) {
			return r.Error()
		}
		if len(n.Taints) == 0 {
			continue
		}
		if r := c.Kubectl(ctx, "", append([]string{"taint", "nodes", n.Name}, n.Taints...)...); r.Err != nil {
			return fmt.Errorf("tainting node %s with %v: %w", n.Name, n.Taints, r.Error())
		}
	}
	return nil
}

// notReadyTaint is what the API server's admission puts on every new Node.
const notReadyTaint = "node.kubernetes.io/not-ready:NoSchedule"
