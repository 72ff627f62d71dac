package coverage

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeDiagnosis says why one node that should run a daemon Pod has no ready one.
type NodeDiagnosis struct {
	Node string `json:"node"`
	// Pod is the daemon Pod on the node, "" when there is none.
	Pod string `json:"pod,omitempty"`
	// State is "NoPod", "Pending", "Waiting", "NotReady" or the Pod's phase.
	State string `json:"state"`
	// Reason is the scheduler's, kubelet's or probe's own words.
	Reason string `json:"reason"`
}

// EligibleNodes returns, sorted, the nodes of the snapshot that a prediction
// made on it (Predict(ds, nodes)) does not skip. The list may be shared
// with the snapshot and other callers: it is read, never changed.
func EligibleNodes(cov *Coverage, nodes *NodeSnapshot) []string {
	o := nodes.sorted()
	if cov.Skipped() == 0 && cov.Eligible == len(o.names) {
		return o.names[:len(o.names):len(o.names)]
	}
	skipped := make([]uint64, (len(o.names)+63)/64)
	for _, s := range cov.Skips {
		for _, r := range s.runs {
			at, ok := o.positions(&r)
			if !ok {
				return eligibleByName(cov, o.names)
			}
			r.each(func(i int32) { skipped[at[i]/64] |= 1 << (at[i] % 64) })
		}
		if s.runs == nil && len(s.names) > 0 {
			return eligibleByName(cov, o.names)
		}
	}
	return nodes.eligible.list(skipped, func() []string {
		out := make([]string, 0, cov.Eligible)
		for i, n := range o.names {
			if skipped[i/64]&(1<<(i%64)) == 0 {
				out = append(out, n)
			}
		}
		return out[:len(out):len(out)]
	})
}

// eligibleCache keeps the last few lists EligibleNodes made on a snapshot,
// by the set of positions they skip. The DaemonSets of a cluster skip
// alike (the control plane, a tainted pool), and a node change makes a
// snapshot that the auditor then weighs every DaemonSet it moves on: each
// would make the same list of thousands of names again.
type eligibleCache struct {
	mu    sync.Mutex
	lists []eligibleList
}

type eligibleList struct {
	skipped []uint64
	names   []string
}

// eligibleCached is how many lists a snapshot keeps: at 65,000 nodes a
// list is about 1 MB.
const eligibleCached = 4

// list returns the list made for skipped, making it with build when there
// is none.
func (c *eligibleCache) list(skipped []uint64, build func() []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, l := range c.lists {
		if slices.Equal(l.skipped, skipped) {
			// The most recent first: a stream of DaemonSets alike keeps
			// theirs.
			copy(c.lists[1:i+1], c.lists[:i])
			c.lists[0] = l
			return l.names
		}
	}
	l := eligibleList{skipped: skipped, names: build()}
	if len(c.lists) < eligibleCached {
		c.lists = append(c.lists, eligibleList{})
	}
	copy(c.lists[1:], c.lists[:len(c.lists)-1])
	c.lists[0] = l
	return l.names
}

// eligibleByName is EligibleNodes for skips that are not runs of the
// snapshot's classes (made by hand, or on another snapshot).
func eligibleByName(cov *Coverage, names []string) []string {
	skipped := make(map[string]bool, cov.Skipped())
	for _, s := range cov.Skips {
		for _, n := range s.Nodes() {
			skipped[n] = true
		}
	}
	out := make([]string, 0, len(names)-len(skipped))
	for _, n := range names { // already sorted
		if !skipped[n] {
			out = append(out, n)
		}
	}
	return out
}

// InvestigateGap does the node-by-node investigation a persistent gap calls
// for: for each node in eligible without a ready Pod of ds among pods, it
// names the node and what its Pod is doing. pods should be the Pods of this
// one DaemonSet (listed on demand by its selector); others are ignored.
func InvestigateGap(ds *appsv1.DaemonSet, eligible []string, pods []corev1.Pod) []NodeDiagnosis {
	byNode := map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if !ownedBy(p, ds) || p.DeletionTimestamp != nil {
			continue
		}
		node := DaemonPodNode(p)
		// Prefer a ready Pod, then the newest, when a node has several.
		if cur, ok := byNode[node]; !ok || (!PodReady(cur) && (PodReady(p) || p.CreationTimestamp.After(cur.CreationTimestamp.Time))) {
			byNode[node] = p
		}
	}
	var out []NodeDiagnosis
	for _, node := range eligible {
		p, ok := byNode[node]
		if !ok {
			out = append(out, NodeDiagnosis{Node: node, State: "NoPod", Reason: "no daemon Pod on this node yet"})
			continue
		}
		if PodReady(p) {
			continue
		}
		d := NodeDiagnosis{Node: node, Pod: p.Name}
		d.State, d.Reason = podTrouble(p)
		out = append(out, d)
	}
	return out
}

// ownedBy reports whether ds controls p: by UID, or by name for a DaemonSet
// read from a manifest (no UID yet).
func ownedBy(p *corev1.Pod, ds *appsv1.DaemonSet) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.Kind == "DaemonSet" && (ref.UID == ds.UID || (ds.UID == "" && ref.Name == ds.Name))
}

// DaemonPodNode is the node a daemon Pod is bound to, or, before the
// scheduler binds it, the node its required affinity names (the controller
// pins each Pod with a matchFields term on metadata.name).
func DaemonPodNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	required := requiredNodeSelector(&p.Spec)
	if required == nil {
		return ""
	}
	for _, t := range required.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// PodReady reports whether the Pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	c := condition(p, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// podTrouble explains a Pod that is not ready, in the order an operator
// would look: not scheduled, containers waiting, then failing readiness.
func podTrouble(p *corev1.Pod) (string, string) {
	if c := condition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
		return "Pending", joinNonEmpty(c.Reason, c.Message)
	}
	statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
			return "Waiting", fmt.Sprintf("container %s: %s", cs.Name, joinNonEmpty(w.Reason, w.Message))
		}
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return string(p.Status.Phase), joinNonEmpty(p.Status.Reason, p.Status.Message)
	case corev1.PodPending:
		if r := joinNonEmpty(p.Status.Reason, p.Status.Message); r != "" {
			return "Pending", r
		}
		return "Pending", "waiting to start"
	}
	var unready []string
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	if len(unready) > 0 {
		return "NotReady", "readiness failing for container " + strings.Join(unready, ", ")
	}
	if c := condition(p, corev1.PodReady); c != nil {
		return "NotReady", joinNonEmpty(c.Reason, c.Message)
	}
	return "NotReady", "not ready"
}

// joinNonEmpty joins the non-empty parts with ": ".
func joinNonEmpty(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return strings.Join(kept, ": ")
}
