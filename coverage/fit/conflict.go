package fit

import (
	"iter"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// On yields each of names with the cluster's node of that name, or nil
// where the cluster does not have it, in the order given. Names given
// sorted (coverage.EligibleNodes) are found in one walk beside the
// cluster's own sorted list, with no lookup per name; a name that comes
// out of order is looked up (next).
func (c *Cluster) On(names []string) iter.Seq2[string, *Node] {
	return func(yield func(string, *Node) bool) {
		at := 0
		for _, name := range names {
			var n *Node
			if i, _ := c.next(&at, name); i >= 0 {
				n = c.list[i]
			}
			if !yield(name, n) {
				return
			}
		}
	}
}

// next returns the index in the list of the node named name, or -1,
// looking from c.names[*at] on and leaving *at after it: names asked in
// order are found in one pass. A name the walk has passed (asked out of
// order, or twice) is found by a binary search of what lies behind;
// inOrder is false then. Nothing is compared before the walk: checking
// that 5,000 names were sorted, in the prediction and again in On, cost
// more than the walk itself.
func (c *Cluster) next(at *int, name string) (i int, inOrder bool) {
	for ; *at < len(c.names); *at++ {
		switch strings.Compare(c.names[*at], name) {
		case 0:
			*at++
			return *at - 1, true
		case 1:
			return c.behind(*at, name)
		}
	}
	return c.behind(*at, name)
}

// behind returns the index of the node named name among the first at of
// the list, or -1.
func (c *Cluster) behind(at int, name string) (int, bool) {
	if i, ok := slices.BinarySearch(c.names[:at], name); ok {
		return i, false
	}
	return -1, true
}

// Nodes returns the cluster's nodes, sorted by name; they are only read.
func (c *Cluster) Nodes() []*Node { return c.list }

// NodesWithAntiAffinity returns the nodes that hold a Pod with required
// anti-affinity terms; they are only read.
func (c *Cluster) NodesWithAntiAffinity() []*Node { return c.domain.withTerms }

// HoldsHostPorts reports whether any Pod bound to a node holds a host port.
func (c *Cluster) HoldsHostPorts() bool { return c.ports }

// NamespaceLabels returns a namespace's labels as the cluster knows them.
func (c *Cluster) NamespaceLabels(namespace string) map[string]string { return c.namespaces[namespace] }

// SharedPorts returns the ports of want that collide with a port of used,
// by NodePorts' rule (the same protocol and port, the same host IP or
// 0.0.0.0 on either side).
func SharedPorts(want, used []HostPort) []HostPort {
	var out []HostPort
	for _, w := range want {
		if conflicts(w, used) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// Side is one Pod as anti-affinity weighs it: where it lives, its labels
// and its required anti-affinity terms (NewTerms).
type Side struct {
	Namespace string
	// NamespaceLabels are its namespace's labels, which the other side's
	// namespace selectors match.
	NamespaceLabels map[string]string
	Labels          map[string]string
	Terms           []Term
}

// Repels returns the topology keys under which a and b may not share a
// domain, by the scheduler's InterPodAffinity rule for required terms,
// which works both ways: a term of a that selects b, or a term of b that
// selects a.
func Repels(a, b *Side) []string {
	var keys []string
	add := func(from, to *Side) {
		for i := range from.Terms {
			t := &from.Terms[i]
			if t.matches(to.Namespace, to.Labels, labels.Set(to.NamespaceLabels)) && !slices.Contains(keys, t.TopologyKey) {
				keys = append(keys, t.TopologyKey)
			}
		}
	}
	add(a, b)
	add(b, a)
	slices.Sort(keys)
	return keys
}

// SideOf is the Side of a Pod made from a template in namespace.
func SideOf(namespace string, nsLabels map[string]string, tmpl *corev1.PodTemplateSpec) (*Side, error) {
	terms, err := NewTerms(namespace, RequiredAntiAffinity(&tmpl.Spec))
	if err != nil {
		return nil, err
	}
	return &Side{Namespace: namespace, NamespaceLabels: nsLabels, Labels: tmpl.Labels, Terms: terms}, nil
}

// SideOfPod is the Side of a Pod's record on a node.
func SideOfPod(p *Pod, nsLabels map[string]string) *Side {
	return &Side{Namespace: p.Namespace, NamespaceLabels: nsLabels, Labels: p.Labels, Terms: p.AntiAffinity}
}
