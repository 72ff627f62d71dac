package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/policy"
)

// DaemonSetPath is where the API server sends DaemonSet reviews.
const DaemonSetPath = "/validate-daemonset"

// DefaultFailOpenNamespaces are the infrastructure namespaces whose
// DaemonSets (CNI, kube-proxy, CSI node plugins) must never wait for dsguard:
// if the network breaks, dsguard's own Pods lose it too, and the fix to the
// CNI DaemonSet must still land. The chart's fail-open webhook entry covers
// the same list (webhook.failOpenNamespaces).
var DefaultFailOpenNamespaces = policy.InfrastructureNamespaces

// DaemonSetHandler admits or denies apps/v1 DaemonSets. It is a plain
// admission.Handler rather than an admission.Validator because it sets audit
// annotations, which the Validator interface cannot.
type DaemonSetHandler struct {
	decoder admission.Decoder
	source  *clusterview.PolicySource
	metrics *Metrics
	// ownNamespace is never evaluated, so that dsguard can always repair itself.
	ownNamespace string
	// nodes gives the current node snapshot; nil (or a nil snapshot) skips
	// the node-dependent rules.
	nodes func() *coverage.NodeSnapshot
	// nodesStale returns the node view's age once it is past its bound
	// (the API server has been out of reach), else 0.
	nodesStale func() time.Duration
	heavy      *heavyLane

	// Now is the clock exemption expiries are judged by (time.Now, as
	// NewDaemonSetHandler sets it). The generated admission policies judge
	// them by the day they were rendered; the tests that compare the two
	// set both to one day.
	Now func() time.Time

	// FailOpenNamespaces are the infrastructure namespaces (CNI, storage
	// and kube-system) whose webhook entry fails open: there dsguard only
	// warns, and its own errors (no policy yet, an undecodable request, a
	// panic) admit with a warning instead of refusing.
	FailOpenNamespaces []string
	// PodSample, when set, lists some of a DaemonSet's Pods (a page of a
	// few dozen): at an UPDATE that changes the template, rollout-impact
	// estimates the rollout's length from how long they took to become
	// ready. Asked within readySampleTimeout; on an error the estimate
	// falls back to the template's floor.
	PodSample func(ctx context.Context, ds *appsv1.DaemonSet) ([]corev1.Pod, error)
	// Fit, when set, returns what kube-scheduler weighs on the nodes (their
	// allocatable, the Pods bound there, the PriorityClasses), or nil until
	// it is known: resource-fit and priority-class judge by it. It is not
	// used while the node view is stale.
	Fit func() *fit.Cluster
	// DaemonSets, when set, lists the cluster's DaemonSets (from a cache:
	// they are only read), which host-port-conflict and
	// anti-affinity-conflict compare the reviewed one with. Called only
	// when such a rule runs.
	DaemonSets func(ctx context.Context) ([]*appsv1.DaemonSet, error)
	// ClientAuth is true when callers can authenticate with a client
	// certificate. Then requests without one are answered but left out of
	// the metrics alerts read (decisions, findings, bypasses), so a Pod
	// that reaches the port cannot forge them.
	ClientAuth bool
	// MayGrant, when set, asks the cluster's authorizer whether user may
	// grant exemptions in namespace (exemptions.grantedByRBAC): asked only
	// when a request writes an exemption or intended-coverage annotation.
	// Unset, RBAC grants nobody and only exemptions.allowedGroups may.
	MayGrant func(ctx context.Context, user authenticationv1.UserInfo, namespace string) (bool, error)
	// Grantors says who RBAC lets grant exemptions in namespace, for the
	// message of a refusal.
	Grantors func(namespace string) string
}

// requester is who asks for req, with the authorizer's answer on whether
// they may grant exemptions asked at most once.
func (h *DaemonSetHandler) requester(ctx context.Context, req admission.Request) policy.Requester {
	r := policy.Requester{Username: req.UserInfo.Username, Groups: req.UserInfo.Groups, Grantors: h.Grantors}
	switch {
	case h.MayGrant != nil && callerOf(ctx, h.ClientAuth).failedClientAuth():
		// Only the API server authenticates, and it alone is answered
		// truly: a forged review must not make dsguard ask the API
		// server on its behalf.
		r.MayGrant = func(string) (bool, error) {
			return false, errors.New("the review does not come from an authenticated API server")
		}
	case h.MayGrant != nil:
		// One request judges one namespace: the answer is asked once.
		var asked bool
		var ok bool
		var err error
		r.MayGrant = func(namespace string) (bool, error) {
			if !asked {
				asked = true
				ok, err = h.MayGrant(ctx, req.UserInfo, namespace)
			}
			return ok, err
		}
	}
	return r
}

// NewDaemonSetHandler returns the DaemonSet handler. nodes may be nil (no
// node-dependent rules).
func NewDaemonSetHandler(scheme *runtime.Scheme, source *clusterview.PolicySource, m *Metrics, ownNamespace string,
	nodes *clusterview.NodeView) *DaemonSetHandler {
	h := &DaemonSetHandler{
		decoder:      admission.NewDecoder(scheme),
		source:       source,
		metrics:      m,
		ownNamespace: ownNamespace,
		nodes:        func() *coverage.NodeSnapshot { return nil },
		nodesStale:   func() time.Duration { return 0 },
		Now:          time.Now,
		heavy:        newHeavyLane(heavyLaneWidth()),
	}
	if nodes != nil {
		h.nodes, h.nodesStale = nodes.Snapshot, nodes.StaleFor
	}
	if m != nil {
		h.heavy.waiting = m.HeavyWaiting
	}
	return h
}

var daemonSetKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Handle implements admission.Handler: it decodes the request's objects
// and judges them. The webhook server calls HTTPHandler instead, which
// decodes them with the review.
func (h *DaemonSetHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	return h.judge(ctx, req, decoded{})
}

// statusWrite judges an UPDATE through daemonsets/status, which the API
// server stores with the old spec but the new metadata: an exemption or
// intended coverage written there is refused for everyone (in the fail-open
// namespaces, warned about) when the policy restricts who may grant them,
// since a later UPDATE would see it unchanged and trust it. The webhook
// entry's matchConditions send only such writes.
func (h *DaemonSetHandler) statusWrite(p *policy.Policy, ds *appsv1.DaemonSet, previous map[string]string, namespace string) admission.Response {
	if !p.GroupGated() {
		return admission.Allowed("the policy lets anyone grant exemptions")
	}
	keys := policy.WrittenGatedAnnotations(ds.Annotations, previous)
	if len(keys) == 0 {
		return admission.Allowed("a status update that writes no exemption or intended-coverage annotation")
	}
	what := policy.AnnotationsPhrase(keys)
	if h.failsOpen(namespace) {
		resp := admission.Allowed("")
		resp.Warnings = []string{fmt.Sprintf("dsguard would refuse the change to %s through the status subresource, where "+
			"nobody may grant exemptions; admitted: namespace %s fails open", what, namespace)}
		return resp
	}
	return admission.Denied(fmt.Sprintf("dsguard refuses the change to %s through the status subresource: exemption and "+
		"intended-coverage annotations are written by an update of the DaemonSet itself, where dsguard checks who may "+
		"grant them; daemonsets/status is for the DaemonSet controller's counters.\n"+
		"  fix: have someone who may grant exemptions run kubectl annotate daemonset %s ... (no --subresource), "+
		"or leave the annotation as it was; removing it is always allowed.", what, ds.Name))
}

// decoded are a request's objects when they were decoded with its review;
// nil ones are decoded from the request's raw objects.
type decoded struct {
	object, oldObject *appsv1.DaemonSet
}

func (h *DaemonSetHandler) judge(ctx context.Context, req admission.Request, objs decoded) (resp admission.Response) {
	uncounted := callerOf(ctx, h.ClientAuth).uncounted()
	counted := uncounted == ""
	var refused bool
	defer func() {
		if r := recover(); r != nil {
			logf.FromContext(ctx).Error(fmt.Errorf("%v", r), "panic while judging a DaemonSet", "stack", string(debug.Stack()))
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("internal error in dsguard: %v", r))
		}
		resp = h.failOpen(req, resp)
		h.countDecision(resp, decisionOf(uncounted, refused, ctx.Err() != nil))
	}()
	return h.handle(ctx, req, objs, counted, &refused)
}

// decisionOf is the decision a request counts as beside its answer: its
// caller's when it was not authenticated, abandoned when its caller went
// away before the answer (nobody reads it: a forged review sent and dropped
// must not count as dsguard's error), refused when dsguard refused it as
// busy; "" to count it by its answer.
func decisionOf(uncounted string, refused, abandoned bool) string {
	switch {
	case uncounted != "":
		return uncounted
	case abandoned:
		return "abandoned"
	case refused:
		return "refused"
	}
	return ""
}

// failOpen turns dsguard's own failures into an admission with a warning in
// the fail-open namespaces, whose webhook entry would ignore the failure
// anyway if dsguard were unreachable: being reachable must not be worse.
func (h *DaemonSetHandler) failOpen(req admission.Request, resp admission.Response) admission.Response {
	if resp.Allowed || resp.Result == nil || resp.Result.Code == http.StatusForbidden || !h.failsOpen(req.Namespace) {
		return resp
	}
	out := admission.Allowed("")
	out.Warnings = []string{oneLine(fmt.Sprintf("dsguard: could not judge this DaemonSet (%s); admitted because namespace %s fails open",
		resp.Result.Message, req.Namespace))}
	out.AuditAnnotations = map[string]string{"fail-open": resp.Result.Message}
	return out
}

func (h *DaemonSetHandler) failsOpen(namespace string) bool {
	return slices.Contains(h.FailOpenNamespaces, namespace)
}

// daemonSet returns the DaemonSet decoded with the review, or decodes raw
// when there is none.
func (h *DaemonSetHandler) daemonSet(raw runtime.RawExtension, decoded *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
	if decoded != nil {
		return decoded, nil
	}
	ds := &appsv1.DaemonSet{}
	if err := h.decoder.DecodeRaw(raw, ds); err != nil {
		return nil, err
	}
	return ds, nil
}

func (h *DaemonSetHandler) handle(ctx context.Context, req admission.Request, objs decoded, counted bool, refused *bool) admission.Response {
	log := logf.FromContext(ctx)
	switch {
	case req.UID == "":
		return admission.Errored(http.StatusBadRequest, errors.New("the admission request has no UID"))
	case req.Kind.Group != daemonSetKind.Group || req.Kind.Version != daemonSetKind.Version || req.Kind.Kind != daemonSetKind.Kind:
		return admission.Errored(http.StatusBadRequest,
			fmt.Errorf("dsguard validates apps/v1 DaemonSets, not %s; check the webhook configuration's rules", req.Kind))
	case req.Operation != admissionv1.Create && req.Operation != admissionv1.Update:
		return admission.Allowed("dsguard only judges CREATE and UPDATE")
	case req.Namespace == h.ownNamespace:
		return admission.Allowed("dsguard does not judge its own namespace")
	}
	active := h.source.Current()
	if active == nil {
		// Readiness keeps traffic away until a policy is loaded; this is
		// the answer if a request arrives anyway. failurePolicy decides.
		return admission.Errored(http.StatusServiceUnavailable, errors.New("dsguard has not loaded a policy yet"))
	}
	if active.Policy.Bypassed(req.UserInfo.Username, req.UserInfo.Groups) {
		log.Info("bypass: admitted without evaluation", "user", req.UserInfo.Username, "groups", req.UserInfo.Groups,
			"authenticatedCaller", Authenticated(ctx))
		if h.metrics != nil && counted {
			h.metrics.Bypasses.Inc()
		}
		return admission.Allowed("bypassed by the dsguard policy (break-glass)")
	}

	ds, err := h.daemonSet(req.Object, objs.object)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the DaemonSet: %w", err))
	}
	if ds.Namespace == "" {
		ds.Namespace = req.Namespace
	}
	var old *appsv1.DaemonSet
	if req.Operation == admissionv1.Update {
		if old, err = h.daemonSet(req.OldObject, objs.oldObject); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old DaemonSet: %w", err))
		}
		if old.Namespace == "" {
			old.Namespace = req.Namespace
		}
	}
	requester := h.requester(ctx, req)
	var previous map[string]string
	if old != nil {
		previous = old.Annotations
	}
	if req.SubResource == "status" {
		return h.statusWrite(active.Policy, ds, previous, req.Namespace)
	}
	// An exemption or intended coverage written by someone outside
	// exemptions.allowedGroups is refused whatever the rule's action, the
	// enforcement override, an unchanged spec or ratcheting: stored, it
	// would be an annotation that later updates leave unchanged, which the
	// group gate trusts. The fail-open namespaces only warn, as for every
	// other deny (Evaluate voids the annotation for this request there).
	refusal := active.Policy.RefuseAnnotationChanges(ds, previous, requester)
	if refusal != nil && !h.failsOpen(req.Namespace) {
		log.Info("refused an exemption annotation", "user", req.UserInfo.Username, "annotations", refusal.Keys)
		return admission.Denied(refusal.Message())
	}
	// On a stale node view the rules judge as `dsguard check` does without
	// --nodes (their offline form) rather than by nodes that may be gone.
	nodes, stale := h.nodes(), h.nodesStale()
	if stale > 0 {
		nodes = nil
	}
	var cluster *fit.Cluster
	if nodes != nil && h.Fit != nil {
		cluster = h.Fit()
	}
	env := policy.Env{
		Policy: active.Policy, Now: h.Now(), Nodes: nodes, Fit: cluster, Context: ctx,
		Requester: &requester, PreviousAnnotations: previous, Previous: old,
		HideNodeNames: !Authenticated(ctx),
		ReadyTimes:    func() *coverage.ReadyTimes { return h.readyTimes(ctx, old, ds) },
	}
	if h.DaemonSets != nil {
		env.DaemonSets = func() []*appsv1.DaemonSet {
			dss, err := h.DaemonSets(ctx)
			if err != nil {
				log.Error(err, "listing DaemonSets to compare with")
			}
			return dss
		}
	}
	// A large placement waits for the heavy lane, so that a flood of them
	// (dry-runs cost the same) queues behind itself, not in front of
	// ordinary DaemonSets. The old object of an UPDATE may be judged too
	// (to ratchet a deny): its work counts, so that a light new object
	// cannot bring a heavy stored one past the lane.
	work := env.PredictionWork(ds)
	if old != nil {
		work += env.PredictionWork(old)
	}
	var refusals *prometheus.CounterVec
	if h.metrics != nil {
		refusals = h.metrics.Refusals
	}
	release, err := enterLane(ctx, h.heavy, work, refusals, h.ClientAuth)
	if err != nil {
		*refused = ctx.Err() == nil
		return admission.Errored(http.StatusServiceUnavailable,
			fmt.Errorf("dsguard is busy judging other large placements and refused this one: %w", err))
	}
	defer release()
	findings := policy.Evaluate(ds, env)

	if old != nil {
		switch {
		case ds.DeletionTimestamp != nil:
			// Finalizer removal on a DaemonSet being deleted must never
			// be blocked, or the object would never go away.
			findings = capFindings(findings, policy.ActionWarn, "")
		case equality.Semantic.DeepEqual(old.Spec, ds.Spec):
			findings = capFindings(findings, policy.ActionWarn, "spec unchanged by this update")
		case active.Policy.Ratcheting() && policy.Count(findings, policy.ActionDeny) > 0:
			// The old object is judged only when its verdict can change
			// the answer: a deny to ratchet.
			findings = ratchet(findings, policy.Evaluate(old, env), old.Annotations)
		}
	}
	if ctx.Err() != nil {
		// The API server gave up: the findings may be incomplete, and
		// nobody waits for them.
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("the request ended before dsguard finished: %w", ctx.Err()))
	}
	if h.failsOpen(req.Namespace) {
		findings = capFindings(findings, policy.ActionWarn, "namespace "+req.Namespace+" fails open")
	}
	if counted {
		h.countFindings(findings)
	}
	if stale > 0 {
		findings = noteStale(findings, stale)
	}
	resp := buildResponse(ds, findings)
	if stale > 0 {
		resp.Warnings = append([]string{staleWarning(stale)}, resp.Warnings...)
	}
	if refusal != nil {
		// A fail-open namespace: the annotation is stored, void for this
		// request, and the writer is told, whatever enforcement says (the
		// finding that voids it follows enforcement; the gate does not).
		resp.Warnings = append([]string{oneLine(refusal.Warning(req.Namespace))}, resp.Warnings...)
	}
	if cause := h.source.Degraded(); cause != nil {
		// Whoever applies a DaemonSet learns that the policy in force is
		// not the one in the ConfigMap (the last good one, or the
		// defaults): a vanished policy is never silent.
		resp.Warnings = append(resp.Warnings, degradedWarning(active.Origin, cause))
	}
	// Denies are logged at info with the request UID (in the context's
	// logger), so an operator can match a user's complaint to a decision.
	logAt := log.V(1)
	if !resp.Allowed {
		logAt = log
	}
	if logAt.Enabled() {
		// Checked first: building the arguments costs allocations on
		// every request, and most are allowed and not logged.
		logAt.Info("evaluated", "allowed", resp.Allowed, "policyGeneration", active.Generation,
			"findings", len(findings), "denied", policy.Count(findings, policy.ActionDeny),
			"warned", policy.Count(findings, policy.ActionWarn))
	}
	return resp
}

// readySampleTimeout bounds the Pod list behind a rollout's duration
// estimate, well inside the webhook's timeout.
const readySampleTimeout = time.Second

// readyTimes observes how long the stored DaemonSet's Pods took to become
// ready, when the update changes the template (it starts a rollout); nil
// otherwise, or when they cannot be listed in time. rollout-impact calls it
// (Env.ReadyTimes) only when it speaks of the rollout's length.
func (h *DaemonSetHandler) readyTimes(ctx context.Context, old, ds *appsv1.DaemonSet) *coverage.ReadyTimes {
	// A caller that has not authenticated makes dsguard ask the API server
	// nothing: a forged review must not turn into Pod lists.
	if h.PodSample == nil || old == nil || old.Status.CurrentNumberScheduled == 0 || callerOf(ctx, h.ClientAuth).failedClientAuth() ||
		equality.Semantic.DeepEqual(old.Spec.Template, ds.Spec.Template) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, readySampleTimeout)
	defer cancel()
	pods, err := h.PodSample(ctx, old)
	if err != nil {
		logf.FromContext(ctx).V(1).Info("no Pods to estimate the rollout's length by", "error", err.Error())
		return nil
	}
	return coverage.ObserveReadyTimes(pods)
}

// noteStale says in every deny message that it was judged without live nodes.
func noteStale(fs []policy.Finding, age time.Duration) []policy.Finding {
	for i := range fs {
		if fs[i].Action == policy.ActionDeny {
			fs[i].Message += fmt.Sprintf(" (judged without live nodes: dsguard's node view is %s old)", age.Round(time.Second))
		}
	}
	return fs
}

// staleWarning is the warning line on every verdict given on a stale node view.
func staleWarning(age time.Duration) string {
	return fmt.Sprintf("dsguard: node view %s old (API server out of reach): node rules judged without live nodes", age.Round(time.Second))
}

// degradedWarning is the warning line on every verdict while the policy
// source is Degraded: which policy judged, and why it is not the ConfigMap's.
func degradedWarning(origin string, cause error) string {
	return oneLine(fmt.Sprintf("dsguard: policy Degraded, judged by %s: %v", origin, cause))
}

// capFindings lowers every finding to at most max, noting why.
func capFindings(fs []policy.Finding, max policy.Action, why string) []policy.Finding {
	for i := range fs {
		if fs[i].Action == policy.ActionDeny && max != policy.ActionDeny && why != "" {
			fs[i].Message += " (" + why + ")"
		}
		fs[i].Action = fs[i].Action.Weaker(max)
	}
	return fs
}

// ratchet turns a deny into a warning when the old object already had the
// same violation (same rule, same field): an UPDATE must not be blocked by a
// problem it did not introduce. A violation the old object carried under an
// exemption for its rule (oldAnnotations) does not count: it was admitted
// because of the exemption, and once that expired or was taken away it
// must not stay admitted for good as "already there".
func ratchet(current, old []policy.Finding, oldAnnotations map[string]string) []policy.Finding {
	type key struct{ rule, field string }
	existing := make(map[key]bool, len(old))
	for _, f := range old {
		if _, exempted := oldAnnotations[policy.ExemptionAnnotationPrefix+f.RuleID]; exempted {
			continue
		}
		if f.Action == policy.ActionDeny {
			existing[key{f.RuleID, f.FieldString()}] = true
		}
	}
	for i := range current {
		f := &current[i]
		if f.Action == policy.ActionDeny && existing[key{f.RuleID, f.FieldString()}] {
			f.Action = policy.ActionWarn
			f.Message += " (already present before this update)"
		}
	}
	policy.SortFindings(current)
	return current
}

func (h *DaemonSetHandler) countFindings(fs []policy.Finding) {
	if h.metrics == nil {
		return
	}
	for _, f := range fs {
		h.metrics.Findings.WithLabelValues(f.RuleID, string(f.Action)).Inc()
	}
}

// countDecision counts the answer, or decision when it is set (see
// decisionOf). Requests that no API server sends (no UID, another kind, an
// undecodable object) count as invalid, not as errors; requests of
// unauthenticated callers (when callers can authenticate) only as
// unauthenticated, requests whose caller went away as abandoned, and
// requests refused as busy as refused: the error alert must not fire on
// forgeries.
func (h *DaemonSetHandler) countDecision(resp admission.Response, decision string) {
	if h.metrics == nil {
		return
	}
	result := "allowed"
	switch {
	case decision != "":
		result = decision
	case resp.Result != nil && resp.Result.Code >= 400 && resp.Result.Code < 500 && resp.Result.Code != http.StatusForbidden:
		result = "invalid"
	case resp.Result != nil && resp.Result.Code >= 500:
		result = "error"
	case !resp.Allowed:
		result = "denied"
	case len(resp.Warnings) > 0:
		result = "warned"
	case resp.Result != nil && resp.Result.Message != "":
		result = "skipped"
	}
	h.metrics.Decisions.WithLabelValues(result).Inc()
}
