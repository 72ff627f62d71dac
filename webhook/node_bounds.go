package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
)

// The bounds of one Node review's work. The Node entry is reachable by any
// Pod where client authentication is off, and a review costs what the Node
// in it makes it cost: every DaemonSet is weighed against every taint. A
// real node carries a handful of taints and at most a few hundred labels
// (node feature discovery's); a review past these bounds is answered
// unjudged, with a warning, as the entry's failurePolicy Ignore would
// answer it if dsguard timed out.
const (
	// MaxNodeTaints is the most taints a Node may carry, before or after
	// the change, for dsguard to judge the change.
	MaxNodeTaints = 128
	// MaxNodeLabels is the most labels a Node may carry, before or after.
	MaxNodeLabels = 1024
	// MaxNodeChangeDaemonSets is the most DaemonSets one review weighs;
	// past it, the first ones by namespace and name are weighed and the
	// answer says so.
	MaxNodeChangeDaemonSets = 5000
	// NodeLaneWidth is how many Node reviews a replica judges at once
	// (Server.RegisterLimited): people change nodes rarely, and one core
	// is then always left to DaemonSet reviews.
	NodeLaneWidth = 1
)

// Timing of a Node review: it waits for its lane at most half the timeout
// the API server gives it (laneWaitFor), and is then judged within a
// quarter of it, so that the answer is sent inside the entry's
// timeoutSeconds. Without a timeout in the request, the chart's default
// (webhook.nodeChanges.timeoutSeconds).
const (
	defaultNodeTimeout = 2 * time.Second
	minNodeJudgeTime   = 100 * time.Millisecond
)

// outOfTime is why a review was not judged when its time ran out.
const outOfTime = "dsguard ran out of the time this entry's timeout leaves it"

// HTTPHandler returns the handler the webhook server serves Node reviews
// with: controller-runtime's, with the review's judgement bounded in time
// by the timeout the API server gives the call.
func (h *NodeChangeHandler) HTTPHandler() http.Handler {
	hook := &admission.Webhook{Handler: h}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), nodeJudgeTime(r))
		defer cancel()
		hook.ServeHTTP(w, r.WithContext(ctx))
	})
}

// nodeJudgeTime is a quarter of the API server's timeout for the call.
func nodeJudgeTime(r *http.Request) time.Duration {
	timeout := defaultNodeTimeout
	if t, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && t > 0 {
		timeout = t
	}
	return max(timeout/4, minNodeJudgeTime)
}

// tooLargeToJudge says why a change between before and after is past the
// bounds, "" when it is within them.
func tooLargeToJudge(before, after *corev1.Node) string {
	taints, labels := max(len(before.Spec.Taints), len(after.Spec.Taints)), max(len(before.Labels), len(after.Labels))
	switch {
	case taints > MaxNodeTaints:
		return fmt.Sprintf("the node carries %d taints, more than the %d dsguard judges", taints, MaxNodeTaints)
	case labels > MaxNodeLabels:
		return fmt.Sprintf("the node carries %d labels, more than the %d dsguard judges", labels, MaxNodeLabels)
	}
	return ""
}

// unjudged admits a change dsguard did not judge, saying why.
func unjudged(node, why string) admission.Response {
	resp := admission.Allowed("not judged")
	resp.Warnings = []string{oneLine(fmt.Sprintf("dsguard: this change to node %s was not judged: %s; "+
		"run `kubectl dsguard taint` or `label` with the same change to see which DaemonSets lose the node", node, why))}
	return resp
}

// placementMoves reports whether the change can alter ds's placement on the
// node: whether it qualifies, or whether a Pod it runs there stays. Only
// then can the node-change rule find anything (coverage.ImpactOf).
func placementMoves(ds *appsv1.DaemonSet, before, after *corev1.Node) bool {
	was, now := coverage.Decide(ds, before), coverage.Decide(ds, after)
	if was != now {
		return true
	}
	return !was.Eligible && coverage.KeepsRunning(ds, before) != coverage.KeepsRunning(ds, after)
}

// byANode reports whether a kubelet makes the request (its node identity).
func byANode(u authenticationv1.UserInfo) bool {
	return strings.HasPrefix(u.Username, "system:node:") || slices.Contains(u.Groups, "system:nodes")
}

// withheldResponse is the answer to a caller that is not known to be the
// API server: the same verdict, counting the DaemonSets instead of naming
// them, so that a Pod that reaches the port cannot list the cluster's
// DaemonSets with forged reviews.
func withheldResponse(node string, judged []judgedDaemonSet) admission.Response {
	denied, warned := map[string]bool{}, map[string]bool{}
	for _, j := range judged {
		switch j.finding.Action {
		case policy.ActionDeny:
			denied[j.name] = true
		case policy.ActionWarn:
			warned[j.name] = true
		}
	}
	const withheld = "names are given only to the API server, and dsguard cannot tell this caller is it"
	resp := admission.Allowed("")
	if len(denied) > 0 {
		resp = admission.Denied(fmt.Sprintf("this change to node %s takes %s away that the dsguard policy says no node may lose (%s)",
			node, counted(len(denied), "agent"), withheld))
	}
	if len(warned) > 0 {
		verb := "lose"
		if len(warned) == 1 {
			verb = "loses"
		}
		resp.Warnings = []string{oneLine(fmt.Sprintf("node-change: %s %s node %s (%s); run `kubectl dsguard taint` or `label` "+
			"with the same change to see which", counted(len(warned), "DaemonSet"), verb, node, withheld))}
	}
	return resp
}

// counted is "1 <noun>" or "<n> <noun>s".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// maxAuditAnnotation bounds the audit annotation's value: the API server's
// audit log keeps it with every event of the request.
const maxAuditAnnotation = 1000

// kubeletAuditAnnotations record, in the API server's audit log, which
// DaemonSets a kubelet's relabel of its own node takes the node from: its
// warnings go to the kubelet's log, which nobody reads.
func kubeletAuditAnnotations(judged []judgedDaemonSet) map[string]string {
	var names []string
	for _, j := range judged {
		if j.finding.Action == policy.ActionWarn && !slices.Contains(names, j.name) {
			names = append(names, j.name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return map[string]string{"node-change": truncate("a kubelet's change to its own node takes it from "+strings.Join(names, ", "), maxAuditAnnotation)}
}
