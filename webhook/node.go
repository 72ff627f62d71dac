package webhook

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
)

// NodePath is where the API server sends reviews of Node updates.
const NodePath = "/validate-node"

// maxNodeChangeLines caps the warning lines of one node change: past it, a
// last line counts the DaemonSets left out (the API server's budget is shared
// with every other webhook on the request).
const maxNodeChangeLines = 8

// NodeChangeHandler says, for an update of a Node's taints or labels by a
// person, which DaemonSets lose the node and how (the node-change rule);
// a deny of that rule refuses the change. The webhook entry narrows the
// requests to those people make (the kubelet's and the node controllers'
// own writes never arrive) and fails open with a short timeout, so that it
// can never block a node's own writes.
type NodeChangeHandler struct {
	decoder admission.Decoder
	source  *clusterview.PolicySource
	metrics *Metrics
	// DaemonSets lists the cluster's DaemonSets (an informer's cache).
	DaemonSets func(ctx context.Context) ([]appsv1.DaemonSet, error)
	// PodsOnNode returns the Pods bound to one node, metadata only: which
	// DaemonSets run a Pod there.
	PodsOnNode func(ctx context.Context, node string) ([]metav1.PartialObjectMetadata, error)
	// Now is the clock exemption expiries are judged by.
	Now func() time.Time
	// ClientAuth is DaemonSetHandler.ClientAuth: a caller that has not
	// authenticated is answered without a judgement, since one would tell
	// it which DaemonSets run where.
	ClientAuth bool
}

// NewNodeChangeHandler returns the Node handler; DaemonSets and PodsOnNode
// must be set before it serves.
func NewNodeChangeHandler(scheme *runtime.Scheme, source *clusterview.PolicySource, m *Metrics) *NodeChangeHandler {
	return &NodeChangeHandler{decoder: admission.NewDecoder(scheme), source: source, metrics: m, Now: time.Now}
}

var nodeKind = corev1.SchemeGroupVersion.WithKind("Node")

// Handle implements admission.Handler.
func (h *NodeChangeHandler) Handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	result := "allowed"
	// Not from the API server's addresses: judged all the same (an address
	// is no identity, and this entry must not let a change through
	// unjudged), but counted apart from the API server's answers.
	unverified := Unverified(ctx)
	defer func() {
		if r := recover(); r != nil {
			logf.FromContext(ctx).Error(fmt.Errorf("%v", r), "panic while judging a node change", "stack", string(debug.Stack()))
			resp, result = admission.Errored(http.StatusInternalServerError, fmt.Errorf("internal error in dsguard: %v", r)), "error"
		}
		switch {
		case !resp.Allowed && resp.Result != nil && resp.Result.Code == http.StatusForbidden:
			result = "denied"
		case !resp.Allowed && resp.Result != nil && resp.Result.Code >= 400 && resp.Result.Code < 500:
			// A review no API server sends (another kind, an object
			// that does not decode): the caller's mistake or a forgery,
			// not dsguard failing, which is what "error" alerts on.
			result = "invalid"
		case !resp.Allowed:
			result = "error"
		case len(resp.Warnings) > 0:
			result = "warned"
		}
		if unverified {
			result = "unverified"
		}
		if h.metrics != nil {
			h.metrics.NodeChangeDecisions.WithLabelValues(result).Inc()
		}
	}()
	switch {
	case h.ClientAuth && !Authenticated(ctx):
		// First: whatever a caller that did not authenticate sends, it
		// learns nothing and moves no series but its own.
		result = "unauthenticated"
		return admission.Allowed("not judged: the caller did not authenticate")
	case req.Kind.Group != nodeKind.Group || req.Kind.Version != nodeKind.Version || req.Kind.Kind != nodeKind.Kind:
		return admission.Errored(http.StatusBadRequest,
			fmt.Errorf("dsguard's Node entry judges v1 Nodes, not %s; check the webhook configuration's rules", req.Kind))
	case req.Operation != admissionv1.Update:
		return admission.Allowed("dsguard only judges Node updates")
	}
	active := h.source.Current()
	if active == nil {
		return admission.Errored(http.StatusServiceUnavailable, errors.New("dsguard has not loaded a policy yet"))
	}
	if active.Policy.Bypassed(req.UserInfo.Username, req.UserInfo.Groups) {
		result = "bypassed"
		return admission.Allowed("bypassed by the dsguard policy (break-glass)")
	}
	var before, after corev1.Node
	if err := h.decoder.DecodeRaw(req.OldObject, &before); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old Node: %w", err))
	}
	if err := h.decoder.DecodeRaw(req.Object, &after); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Node: %w", err))
	}
	if equality.Semantic.DeepEqual(before.Spec.Taints, after.Spec.Taints) && maps.Equal(before.Labels, after.Labels) {
		return admission.Allowed("neither taints nor labels change")
	}
	dss, err := h.DaemonSets(ctx)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("listing DaemonSets: %w", err))
	}
	pods, err := h.PodsOnNode(ctx, before.Name)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("listing the Pods on %s: %w", before.Name, err))
	}
	change := &policy.NodeChange{Before: &before, After: &after, WithPod: coverage.DaemonSetsWithPod(pods)}
	requester := policy.Requester{Username: req.UserInfo.Username, Groups: req.UserInfo.Groups}
	var judged []judgedDaemonSet
	now := h.Now()
	for i := range dss {
		ds := &dss[i]
		fs := policy.Evaluate(ds, policy.Env{
			Policy: active.Policy, Now: now, Context: ctx, Requester: &requester,
			// Its stored exemptions are judged as stored: the change is
			// to the node, not to them.
			PreviousAnnotations: ds.Annotations, NodeChange: change,
		})
		if ctx.Err() != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("judging the node change: %w", ctx.Err()))
		}
		for _, f := range fs {
			if h.metrics != nil && !unverified {
				h.metrics.Findings.WithLabelValues(f.RuleID, string(f.Action)).Inc()
			}
			judged = append(judged, judgedDaemonSet{name: ds.Namespace + "/" + ds.Name, finding: f})
		}
	}
	return nodeChangeResponse(before.Name, judged)
}

// judgedDaemonSet is one DaemonSet's finding on a node change.
type judgedDaemonSet struct {
	name    string
	finding policy.Finding
}

// nodeChangeResponse denies when any finding denies, listing those, and
// warns with the rest, one line per action and message, naming the
// DaemonSets that share it.
func nodeChangeResponse(node string, judged []judgedDaemonSet) admission.Response {
	type group struct {
		rule    string
		action  policy.Action
		message string
		fix     string
		names   []string
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, j := range judged {
		f := j.finding
		if f.Action != policy.ActionDeny && f.Action != policy.ActionWarn {
			continue
		}
		key := f.RuleID + "\x00" + string(f.Action) + "\x00" + f.Message
		g := byKey[key]
		if g == nil {
			g = &group{rule: f.RuleID, action: f.Action, message: f.Message, fix: f.Remediation}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.names = append(g.names, j.name)
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return strings.Compare(a.names[0], b.names[0]) })
	var denied []string
	var warnings []string
	for _, g := range groups {
		slices.Sort(g.names)
		if g.action == policy.ActionDeny {
			denied = append(denied, fmt.Sprintf("[%s] %s: %s\n  fix: %s", g.rule, strings.Join(g.names, ", "), g.message, g.fix))
			continue
		}
		warnings = append(warnings, namedLine(g.rule+": ", g.names, ": "+g.message))
	}
	if len(warnings) > maxNodeChangeLines {
		left := len(warnings) - maxNodeChangeLines + 1
		warnings = append(warnings[:maxNodeChangeLines-1],
			fmt.Sprintf("dsguard: %d more groups of DaemonSets lose node %s; run `kubectl dsguard taint` or `label` with the same change to see all", left, node))
	}
	resp := admission.Allowed("")
	if len(denied) > 0 {
		resp = admission.Denied(fmt.Sprintf("this change to node %s takes agents away that the dsguard policy says no node may lose:\n%s",
			node, strings.Join(denied, "\n")))
	}
	resp.Warnings = warnings
	return resp
}

// namedLine is prefix, the names and suffix on one warning line within the
// per-warning limit: names that do not fit are counted instead.
func namedLine(prefix string, names []string, suffix string) string {
	for shown := len(names); shown > 0; shown-- {
		list := strings.Join(names[:shown], ", ")
		if shown < len(names) {
			list += fmt.Sprintf(" and %d more", len(names)-shown)
		}
		if line := oneLine(prefix + list + suffix); len(line) <= maxWarningLen && !strings.HasSuffix(line, "...") {
			return line
		}
	}
	// One name too long for a line of its own is counted as well.
	counted := fmt.Sprintf("%d DaemonSets", len(names))
	if len(names) == 1 {
		counted = "1 DaemonSet"
	}
	return oneLine(prefix + counted + suffix)
}
