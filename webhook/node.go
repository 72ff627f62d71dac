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
	"k8s.io/apimachinery/pkg/types"
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
// person or a kubelet, which DaemonSets lose the node and how (the
// node-change rule); a deny of that rule refuses a person's change, never a
// kubelet's. The webhook entry narrows the requests to those (the node
// controllers' writes and the kubelet's status updates never arrive) and
// fails open with a short timeout, so that it can never block a node's own
// writes. Its work per review is bounded (see node_bounds.go), and the
// server judges its reviews one at a time in a lane of their own
// (Server.RegisterLimited), so that Node reviews, forged ones included,
// never hold up DaemonSet reviews.
type NodeChangeHandler struct {
	decoder admission.Decoder
	source  *clusterview.PolicySource
	metrics *Metrics
	// DaemonSets lists the cluster's DaemonSets, sorted by namespace and
	// name (clusterview.DaemonSetLister.List: shared, only read).
	DaemonSets func(ctx context.Context) ([]*appsv1.DaemonSet, error)
	// PodsOnNode returns the Pods bound to one node, metadata only: which
	// DaemonSets run a Pod there. Asked only for the API server's reviews
	// of a change that moves some DaemonSet's placement.
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
	// Decided once, by the server, at the request's arrival.
	c := callerOf(ctx, h.ClientAuth)
	uncounted := c.uncounted()
	defer func() {
		if r := recover(); r != nil {
			logf.FromContext(ctx).Error(fmt.Errorf("%v", r), "panic while judging a node change", "stack", string(debug.Stack()))
			resp, result = admission.Errored(http.StatusInternalServerError, fmt.Errorf("internal error in dsguard: %v", r)), "error"
		}
		switch {
		case result != "allowed":
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
		if uncounted != "" {
			result = uncounted
		}
		if h.metrics != nil {
			h.metrics.NodeChangeDecisions.WithLabelValues(result).Inc()
		}
	}()
	switch {
	case c.failedClientAuth():
		// First: whatever a caller that did not authenticate sends, it
		// learns nothing and moves no series but its own.
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
	if why := tooLargeToJudge(&before, &after); why != "" {
		result = "unjudged"
		return unjudged(before.Name, why)
	}
	all, err := h.DaemonSets(ctx)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("listing DaemonSets: %w", err))
	}
	// Only the DaemonSets whose placement on the node the change moves
	// are judged, and only for those are the node's Pods listed.
	judgedOf := min(len(all), MaxNodeChangeDaemonSets)
	var moved []*appsv1.DaemonSet
	for _, ds := range all[:judgedOf] {
		if ctx.Err() != nil {
			result = "unjudged"
			return unjudged(before.Name, outOfTime)
		}
		if placementMoves(ds, &before, &after) {
			moved = append(moved, ds)
		}
	}
	var notes []string
	if judgedOf < len(all) {
		notes = append(notes, fmt.Sprintf("dsguard judged this change to node %s for the first %d of %d DaemonSets (by namespace and name) only",
			before.Name, judgedOf, len(all)))
	}
	if len(moved) == 0 {
		resp := admission.Allowed("no DaemonSet's placement on the node changes")
		resp.Warnings = notes
		return resp
	}
	change := &policy.NodeChange{Before: &before, After: &after}
	if c.mayLearnNames() {
		pods, err := h.PodsOnNode(ctx, before.Name)
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("listing the Pods on %s: %w", before.Name, err))
		}
		change.WithPod = coverage.DaemonSetsWithPod(pods)
	} else {
		// A caller dsguard cannot tell is the API server makes it ask
		// the API server nothing: each DaemonSet is judged as if its Pod
		// ran on the node, which finds every loss that one with a Pod
		// there would have (a deny is never lost by it).
		change.WithPod = make(map[types.NamespacedName]bool, len(moved))
		for _, ds := range moved {
			change.WithPod[types.NamespacedName{Namespace: policy.NamespaceOf(ds), Name: ds.Name}] = true
		}
	}
	requester := policy.Requester{Username: req.UserInfo.Username, Groups: req.UserInfo.Groups}
	var judged []judgedDaemonSet
	now := h.Now()
	for _, ds := range moved {
		fs := policy.Evaluate(ds, policy.Env{
			Policy: active.Policy, Now: now, Context: ctx, Requester: &requester,
			// Its stored exemptions are judged as stored: the change is
			// to the node, not to them.
			PreviousAnnotations: ds.Annotations, NodeChange: change,
		})
		if ctx.Err() != nil {
			result = "unjudged"
			return unjudged(before.Name, outOfTime)
		}
		for _, f := range fs {
			if h.metrics != nil && uncounted == "" {
				h.metrics.Findings.WithLabelValues(f.RuleID, string(f.Action)).Inc()
			}
			judged = append(judged, judgedDaemonSet{name: policy.NamespaceOf(ds) + "/" + ds.Name, finding: f})
		}
	}
	byNode := byANode(req.UserInfo)
	if byNode {
		// A kubelet relabelling its own node (the labels the
		// NodeRestriction admission plugin lets it set) is warned, never
		// refused: refusing it would fail the kubelet's status update
		// that carries the labels, and the node would go NotReady.
		for i := range judged {
			judged[i].finding.Action = judged[i].finding.Action.Weaker(policy.ActionWarn)
		}
	}
	if !c.mayLearnNames() {
		resp = withheldResponse(before.Name, judged)
	} else {
		resp = nodeChangeResponse(before.Name, judged)
		if byNode {
			resp.AuditAnnotations = kubeletAuditAnnotations(judged)
		}
	}
	resp.Warnings = append(resp.Warnings, notes...)
	return resp
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
	return oneLine(prefix + counted(len(names), "DaemonSet") + suffix)
}
