package coverage

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// KeepsRunning reports whether the DaemonSet controller leaves a daemon
// Pod that already runs on node there (NodeShouldRunDaemonPod's
// shouldContinueRunning): the node matches nodeName, selector and
// affinity, and every NoExecute taint on it is tolerated. A NoSchedule taint
// only keeps new Pods away.
func KeepsRunning(ds *appsv1.DaemonSet, node *corev1.Node) bool {
	d := Decide(ds, node)
	if d.Eligible {
		return true
	}
	if node == nil || d.Kind != SkipTaint {
		return false
	}
	spec := &ds.Spec.Template.Spec
	for i := range node.Spec.Taints {
		if t := &node.Spec.Taints[i]; t.Effect == corev1.TaintEffectNoExecute && !ToleratedByDaemonPod(spec, t) {
			return false
		}
	}
	return true
}

// Impact is what a change to a node does to one DaemonSet there.
type Impact string

// The impacts, from the DaemonSet's point of view.
const (
	// ImpactNone: the change alters nothing for the DaemonSet.
	ImpactNone Impact = ""
	// ImpactGains: the node now qualifies; the controller makes a Pod.
	ImpactGains Impact = "gains"
	// ImpactRemoved: the node no longer qualifies and the Pod there is
	// deleted now (a selector that no longer matches, an untolerated
	// NoExecute taint).
	ImpactRemoved Impact = "removed"
	// ImpactLostOnRestart: the node no longer qualifies, but the Pod
	// there keeps running (an untolerated NoSchedule taint); once it is
	// restarted, evicted or updated, it never comes back.
	ImpactLostOnRestart Impact = "lost-on-restart"
	// ImpactNoLongerPlaced: the node no longer qualifies; no Pod runs
	// there now, and none will be made.
	ImpactNoLongerPlaced Impact = "no-longer-placed"
)

// NodeImpact is what changing a node from before to after does to ds,
// whose Pod runs on it when hasPod; Decision says why after does not
// qualify.
type NodeImpact struct {
	Impact   Impact
	Decision NodeDecision
}

// ImpactOf judges a change of one node (nil after: the node is removed) for
// a DaemonSet, as the DaemonSet controller will act on it.
func ImpactOf(ds *appsv1.DaemonSet, before, after *corev1.Node, hasPod bool) NodeImpact {
	was, now := Decide(ds, before), Decide(ds, after)
	out := NodeImpact{Decision: now}
	keptBefore := hasPod && KeepsRunning(ds, before)
	keptAfter := hasPod && KeepsRunning(ds, after)
	switch {
	case now.Eligible && !was.Eligible && !hasPod:
		out.Impact = ImpactGains
	case keptBefore && !keptAfter:
		out.Impact = ImpactRemoved
	case hasPod && was.Eligible && !now.Eligible:
		out.Impact = ImpactLostOnRestart
	case !hasPod && was.Eligible && !now.Eligible:
		out.Impact = ImpactNoLongerPlaced
	}
	return out
}

// Loses reports whether the DaemonSet loses the node, now or once its Pod
// there is restarted.
func (im NodeImpact) Loses() bool {
	return im.Impact != ImpactNone && im.Impact != ImpactGains
}

// Why says what the change does on node, for the person about to make it,
// in the words of the skip reasons check and audit print.
func (im NodeImpact) Why(node string) string {
	reason := "the node is removed"
	if im.Decision.Kind != "" {
		reason = Skip{Kind: im.Decision.Kind, Taint: im.Decision.Taint}.Reason()
	}
	switch im.Impact {
	case ImpactGains:
		return "the node now qualifies: the controller makes a Pod on " + node
	case ImpactLostOnRestart:
		return reason + ": its Pod keeps running until it is restarted, evicted or updated, then never comes back on " + node
	case ImpactRemoved:
		if im.Decision.Kind == SkipTaint {
			return reason + ": its Pod on " + node + " is evicted now"
		}
		return reason + ": its Pod on " + node + " is deleted now"
	case ImpactNoLongerPlaced:
		return reason + ": no Pod will be made on " + node
	}
	return ""
}

// DaemonSetsWithPod returns the DaemonSets that own one of pods (the Pods
// bound to one node, metadata is enough), leaving out Pods being deleted:
// ImpactOf's hasPod for each.
func DaemonSetsWithPod(pods []metav1.PartialObjectMetadata) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.Kind == "DaemonSet" {
			out[types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}] = true
		}
	}
	return out
}

// Unready returns, sorted, the nodes that carry the node lifecycle
// controller's not-ready or unreachable taint (any effect) and where ds's
// Pod keeps running (KeepsRunning: daemon Pods tolerate those NoExecute
// taints, so a Pod placed before the node went down stays). In a rollout
// each of them holds one unit of maxUnavailable, or one surge slot, for as
// long as it stays down: its old Pod is unavailable, so the controller
// deletes it at once, but with no kubelet to confirm the deletion the Pod
// stays, and the controller counts the node as without an available Pod;
// where the node still qualifies, the new Pod made there never becomes
// available either.
func (s *NodeSnapshot) Unready(ds *appsv1.DaemonSet) []string {
	var out []string
	for _, c := range s.classes {
		if !slices.ContainsFunc(c.node.Spec.Taints, isUnreadyTaint) {
			continue
		}
		for i, m := range c.members {
			n := s.memberNode(c)
			s.setMember(&n, m.name, c.valuesOf(i))
			if KeepsRunning(ds, &n) {
				out = append(out, m.name)
			}
		}
	}
	slices.Sort(out)
	return out
}

func isUnreadyTaint(t corev1.Taint) bool {
	return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
}
