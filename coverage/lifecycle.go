package coverage

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A lifecycle taint is one a node carries for a part of its life rather than
// for what it is: while it joins the cluster, while a node agent (CNI, CSI
// driver, monitoring agent) that owns the taint gets ready, while it fails,
// is disrupted or shuts down. A DaemonSet that does not tolerate it skips the
// node for that while, as the DaemonSet controller counts it, but the node is
// not a coverage gap: predictions count the skip and mark it, and no rule,
// audit Event or warning names a node for it. Otherwise every node an
// autoscaler adds would raise a warning on every DaemonSet.

// The stages of a node's life the built-in lifecycle taints mark, as their
// reasons say.
const (
	LifecycleJoining       = "joining"
	LifecycleBootstrapping = "bootstrapping"
	LifecycleAgentNotReady = "agent-not-ready"
	LifecycleFailing       = "failing"
	LifecycleDisrupted     = "being disrupted"
	LifecycleShuttingDown  = "shutting down"
)

// LifecycleTaint is one entry of a lifecycle catalogue: a taint key, or every
// key that starts with Key when Prefix is set.
type LifecycleTaint struct {
	Key    string
	Prefix bool
	// Reason says why nodes carry it: a stage of a node's life for the
	// built-in entries, the object that declares it for the others.
	Reason string
}

// String is the key, with a trailing * for a prefix.
func (t LifecycleTaint) String() string {
	if t.Prefix {
		return t.Key + "*"
	}
	return t.Key
}

// builtinLifecycleTaints are the lifecycle taints every cluster may see. The
// agent-not-ready keys are those the agents' own code removes once ready
// (each confirmed in its source); an agent whose key is configurable is
// listed with its default.
var builtinLifecycleTaints = []LifecycleTaint{
	// The kubelet and the node lifecycle controller. The API server's node
	// admission adds not-ready to every Node at registration; the
	// controller adds it and unreachable to a node that stops reporting.
	{Key: corev1.TaintNodeNotReady, Reason: LifecycleJoining + " or " + LifecycleFailing},
	{Key: corev1.TaintNodeUnreachable, Reason: LifecycleFailing},
	// The cloud route controller's until the node's routes exist.
	{Key: corev1.TaintNodeNetworkUnavailable, Reason: LifecycleJoining},
	// Put on a node that is shut down, so that its Pods and volumes move.
	{Key: corev1.TaintNodeOutOfService, Reason: LifecycleShuttingDown},
	// The cloud controller manager's (k8s.io/cloud-provider's
	// TaintExternalCloudProvider and TaintNodeShutdown).
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Reason: LifecycleJoining},
	{Key: "node.cloudprovider.kubernetes.io/shutdown", Reason: LifecycleShuttingDown},
	// Karpenter: registered with unregistered until it adopts the node;
	// disrupted while it drains the node to remove or replace it.
	{Key: "karpenter.sh/unregistered", Reason: LifecycleJoining},
	{Key: "karpenter.sh/disrupted", Reason: LifecycleDisrupted},
	// cluster-autoscaler: a node being scaled down, and one it may scale
	// down (PreferNoSchedule, which never keeps a daemon Pod off).
	{Key: "ToBeDeletedByClusterAutoscaler", Reason: LifecycleDisrupted},
	{Key: "DeletionCandidateOfClusterAutoscaler", Reason: LifecycleDisrupted},
	// Startup taints by convention: NodeReadinessRule keys, and the
	// prefixes cluster-autoscaler treats as startup taints (ignore-taint
	// is the older spelling of startup-taint).
	{Key: "readiness.k8s.io/", Prefix: true, Reason: LifecycleBootstrapping},
	{Key: "startup-taint.cluster-autoscaler.kubernetes.io/", Prefix: true, Reason: LifecycleBootstrapping},
	{Key: "ignore-taint.cluster-autoscaler.kubernetes.io/", Prefix: true, Reason: LifecycleBootstrapping},
	// Node agents that remove their taint once ready on the node.
	{Key: "node.cilium.io/agent-not-ready", Reason: LifecycleAgentNotReady},
	{Key: "cni.istio.io/not-ready", Reason: LifecycleAgentNotReady},
	{Key: "ebs.csi.aws.com/agent-not-ready", Reason: LifecycleAgentNotReady},
	{Key: "efs.csi.aws.com/agent-not-ready", Reason: LifecycleAgentNotReady},
	{Key: "s3.csi.aws.com/agent-not-ready", Reason: LifecycleAgentNotReady},
	{Key: "fsx.openzfs.csi.aws.com/agent-not-ready", Reason: LifecycleAgentNotReady},
	{Key: "disk.csi.azure.com/agent-not-ready", Reason: LifecycleAgentNotReady},
	{Key: "azurelustre.csi.azure.com/agent-not-ready", Reason: LifecycleAgentNotReady},
	{Key: "pd.csi.storage.gke.io/startup", Reason: LifecycleAgentNotReady},
	// The Datadog Operator's untaint controller.
	{Key: "agent.datadoghq.com/not-ready", Reason: LifecycleAgentNotReady},
}

// Lifecycle is a catalogue of lifecycle taints, asked once per group of
// skipped nodes on the admission path: a map lookup, then a short list of
// prefixes. It is never modified once made; share it freely.
type Lifecycle struct {
	exact    map[string]string // key → reason
	prefixes []LifecycleTaint
}

// builtinLifecycle is the catalogue of builtinLifecycleTaints.
var builtinLifecycle = NewLifecycle(builtinLifecycleTaints)

// BuiltinLifecycle returns the built-in catalogue.
func BuiltinLifecycle() *Lifecycle { return builtinLifecycle }

// NewLifecycle returns a catalogue of these taints. Where two entries match
// a key, the exact one wins, then the first prefix.
func NewLifecycle(taints []LifecycleTaint) *Lifecycle {
	l := &Lifecycle{exact: make(map[string]string, len(taints))}
	for _, t := range taints {
		switch {
		case t.Prefix:
			l.prefixes = append(l.prefixes, t)
		case l.exact[t.Key] == "":
			l.exact[t.Key] = t.Reason
		}
	}
	return l
}

// With returns a catalogue of l's taints and these (l itself when there are
// none); l's entries come first.
func (l *Lifecycle) With(taints []LifecycleTaint) *Lifecycle {
	if len(taints) == 0 {
		return l
	}
	return NewLifecycle(append(l.Taints(), taints...))
}

// Reason returns why nodes carry a taint of this key, and whether it is a
// lifecycle taint at all. A nil catalogue holds nothing.
func (l *Lifecycle) Reason(key string) (string, bool) {
	if l == nil {
		return "", false
	}
	if r, ok := l.exact[key]; ok {
		return r, true
	}
	for _, p := range l.prefixes {
		if strings.HasPrefix(key, p.Key) {
			return p.Reason, true
		}
	}
	return "", false
}

// Taints lists the catalogue, exact keys sorted, then the prefixes in order.
func (l *Lifecycle) Taints() []LifecycleTaint {
	out := make([]LifecycleTaint, 0, len(l.exact)+len(l.prefixes))
	for k, r := range l.exact {
		out = append(out, LifecycleTaint{Key: k, Reason: r})
	}
	slices.SortFunc(out, func(a, b LifecycleTaint) int { return strings.Compare(a.Key, b.Key) })
	return append(out, l.prefixes...)
}

// MarkLifecycle marks the taint skips whose key l holds as lifecycle skips,
// which then leave Gaps: for a catalogue a prediction did not know, such as
// the policy's own list.
func (c *Coverage) MarkLifecycle(l *Lifecycle) {
	for i := range c.Skips {
		s := &c.Skips[i]
		if s.Kind != SkipTaint || s.Transient {
			continue
		}
		if reason, ok := l.Reason(s.Taint.Key); ok {
			s.Transient, s.Lifecycle = true, reason
		}
	}
}

// The kinds of object that declare lifecycle taints of their own.
const (
	// KarpenterGroup's NodePools name the taints their nodes start with
	// and lose once initialized (spec.template.spec.startupTaints).
	KarpenterGroup = "karpenter.sh"
	// NodeReadinessGroup's NodeReadinessRules name the taint a node keeps
	// until the rule's conditions hold (spec.taint).
	NodeReadinessGroup = "readiness.node.x-k8s.io"
)

// DeclaresLifecycleTaints reports whether an object of this API group and
// kind is one DeclaredLifecycleTaints reads.
func DeclaresLifecycleTaints(group, kind string) bool {
	return (group == KarpenterGroup && kind == "NodePool") || (group == NodeReadinessGroup && kind == "NodeReadinessRule")
}

// DeclaredLifecycleTaints returns the lifecycle taints a Karpenter NodePool
// (its startupTaints) or a NodeReadinessRule (its taint) declares, each with
// the object as its reason; nothing for any other object. It reads the
// fields by name, whatever the API version, and refuses a declared taint
// without a key.
func DeclaredLifecycleTaints(obj *unstructured.Unstructured) ([]LifecycleTaint, error) {
	gvk := obj.GroupVersionKind()
	if !DeclaresLifecycleTaints(gvk.Group, gvk.Kind) {
		return nil, nil
	}
	var taints []any
	switch gvk.Kind {
	case "NodePool":
		list, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "startupTaints")
		if err != nil {
			return nil, fmt.Errorf("NodePool %s: spec.template.spec.startupTaints: %w", obj.GetName(), err)
		}
		taints = list
	default:
		taint, found, err := unstructured.NestedMap(obj.Object, "spec", "taint")
		if err != nil {
			return nil, fmt.Errorf("NodeReadinessRule %s: spec.taint: %w", obj.GetName(), err)
		}
		if found {
			taints = []any{taint}
		}
	}
	reason := fmt.Sprintf("startup taint of NodePool %s", obj.GetName())
	if gvk.Kind != "NodePool" {
		reason = fmt.Sprintf("taint of NodeReadinessRule %s", obj.GetName())
	}
	out := make([]LifecycleTaint, 0, len(taints))
	for i, t := range taints {
		m, _ := t.(map[string]any)
		key, _ := m["key"].(string)
		if key == "" {
			return nil, fmt.Errorf("%s %s: taint %d has no key", gvk.Kind, obj.GetName(), i)
		}
		out = append(out, LifecycleTaint{Key: key, Reason: reason})
	}
	return out, nil
}
