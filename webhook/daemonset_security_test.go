package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
)

// TestDaemonSetHandler_FailOpenNamespaces: in an infrastructure namespace
// dsguard warns instead of denying, and its own failures admit with a
// warning (a CNI fix must never wait for dsguard).
func TestDaemonSetHandler_FailOpenNamespaces(t *testing.T) {
	tests := []struct {
		name        string
		policy      string
		noPolicy    bool
		req         func(t *testing.T) admission.Request
		allowed     bool
		code        int32
		warningHas  string
		wantResult  string
		auditHasKey string
		failOpen    []string // nil: kube-system, calico-system, kube-flannel
	}{
		{
			name: "a deny becomes a warning in calico-system when it is listed as failing open",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Create, compliantDS(noTolerations, inNamespace("calico-system")), nil)
			},
			allowed: true, code: http.StatusOK, warningHas: "control-plane-toleration: no toleration", wantResult: "warned",
		},
		{
			// A well-known CNI namespace that nobody created yet could be
			// created by a tenant: by default only kube-system fails open,
			// and neither the handler nor the built-in policy lowers a deny
			// elsewhere.
			name:     "with the default list, a deny stands in a kube-flannel a tenant created",
			failOpen: DefaultFailOpenNamespaces,
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Create, compliantDS(noTolerations, inNamespace("kube-flannel")), nil)
			},
			allowed: false, code: http.StatusForbidden, wantResult: "denied",
		},
		{
			name:   "a deny becomes a warning in kube-flannel even when the policy would deny there",
			policy: "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nnamespaceEnforcement: []\n",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Create, compliantDS(noTolerations, inNamespace("kube-flannel")), nil)
			},
			allowed: true, code: http.StatusOK, warningHas: "(namespace kube-flannel fails open)", wantResult: "warned",
		},
		{
			name:     "no policy loaded yet: admitted with a warning in calico-system",
			noPolicy: true,
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Create, compliantDS(inNamespace("calico-system")), nil)
			},
			allowed: true, code: http.StatusOK, warningHas: "could not judge this DaemonSet (dsguard has not loaded a policy yet)",
			wantResult: "warned", auditHasKey: "fail-open",
		},
		{
			name:     "no policy loaded yet: refused elsewhere (failurePolicy decides)",
			noPolicy: true,
			req:      func(t *testing.T) admission.Request { return request(t, admissionv1.Create, compliantDS(), nil) },
			allowed:  false, code: http.StatusServiceUnavailable, wantResult: "error",
		},
		{
			name: "an undecodable object is admitted with a warning in kube-flannel",
			req: func(t *testing.T) admission.Request {
				r := request(t, admissionv1.Create, compliantDS(inNamespace("kube-flannel")), nil)
				r.Object = runtime.RawExtension{Raw: []byte(`{"spec": 1`)}
				return r
			},
			allowed: true, code: http.StatusOK, warningHas: "decoding the DaemonSet", wantResult: "warned",
		},
		{
			name: "a deny stands outside the list",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Create, compliantDS(noTolerations, inNamespace("monitoring")), nil)
			},
			allowed: false, code: http.StatusForbidden, wantResult: "denied",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, m := newTestHandler(t, tt.policy)
			if tt.noPolicy {
				h.source = clusterview.NewPolicySource(nil)
			}
			h.FailOpenNamespaces = []string{"kube-system", "calico-system", "kube-flannel"}
			if tt.failOpen != nil {
				h.FailOpenNamespaces = tt.failOpen
			}
			resp := h.Handle(t.Context(), tt.req(t))
			if resp.Allowed != tt.allowed || resp.Result == nil || resp.Result.Code != tt.code {
				t.Fatalf("allowed=%v result=%+v; want allowed=%v code %d", resp.Allowed, resp.Result, tt.allowed, tt.code)
			}
			if tt.warningHas != "" && !strings.Contains(strings.Join(resp.Warnings, "\n"), tt.warningHas) {
				t.Errorf("warnings %q lack %q", resp.Warnings, tt.warningHas)
			}
			if tt.auditHasKey != "" && resp.AuditAnnotations[tt.auditHasKey] == "" {
				t.Errorf("audit annotations %v lack %q", resp.AuditAnnotations, tt.auditHasKey)
			}
			if got := testutil.ToFloat64(m.Decisions.WithLabelValues(tt.wantResult)); got != 1 {
				t.Errorf("decisions{result=%q} = %v, want 1", tt.wantResult, got)
			}
		})
	}
}

// TestDaemonSetHandler_PanicIsAnError: a panic while judging is answered,
// never a crash: an error elsewhere, an admission in a fail-open namespace.
func TestDaemonSetHandler_PanicIsAnError(t *testing.T) {
	h, _, m := newTestHandler(t, "")
	h.FailOpenNamespaces = []string{"calico-system"}
	h.nodes = func() *coverage.NodeSnapshot { panic("boom") }
	resp := h.Handle(t.Context(), request(t, admissionv1.Create, compliantDS(), nil))
	if resp.Allowed || resp.Result.Code != http.StatusInternalServerError || !strings.Contains(resp.Result.Message, "boom") {
		t.Fatalf("panic outside the fail-open list: %+v", resp.Result)
	}
	resp = h.Handle(t.Context(), request(t, admissionv1.Create, compliantDS(inNamespace("calico-system")), nil))
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "internal error in dsguard: boom") {
		t.Fatalf("panic in calico-system: allowed=%v warnings=%q", resp.Allowed, resp.Warnings)
	}
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues("error")); got != 1 {
		t.Errorf("decisions{result=error} = %v, want 1", got)
	}
}

// TestDaemonSetHandler_ForgedRequestsDoNotMoveAlertMetrics: requests that
// no API server sends, and requests of callers without a client
// certificate when client authentication is on, leave the error, findings
// and bypass series alone.
func TestDaemonSetHandler_ForgedRequestsDoNotMoveAlertMetrics(t *testing.T) {
	h, _, m := newTestHandler(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nbypass:\n  users: [system:admin]\n")
	noUID := request(t, admissionv1.Create, compliantDS(), nil)
	noUID.UID = ""
	h.Handle(t.Context(), noUID)
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues("error")); got != 0 {
		t.Errorf("a UID-less request counted as an error (%v): it would fire the error alert", got)
	}
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues("invalid")); got != 1 {
		t.Errorf("decisions{result=invalid} = %v, want 1", got)
	}

	h.ClientAuth = true
	bypass := request(t, admissionv1.Create, compliantDS(noTolerations), nil)
	bypass.UserInfo.Username = "system:admin"
	if resp := h.Handle(t.Context(), bypass); !resp.Allowed {
		t.Fatalf("bypass user: %+v", resp.Result)
	}
	if got := testutil.ToFloat64(m.Bypasses); got != 0 {
		t.Errorf("an unauthenticated caller moved dsguard_bypass_total to %v", got)
	}
	h.Handle(t.Context(), request(t, admissionv1.Create, compliantDS(noTolerations), nil))
	if got := testutil.ToFloat64(m.Findings.WithLabelValues("control-plane-toleration", "deny")); got != 0 {
		t.Errorf("an unauthenticated caller moved dsguard_findings_total to %v", got)
	}
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues("unauthenticated")); got != 2 {
		t.Errorf("decisions{result=unauthenticated} = %v, want 2", got)
	}

	authed := withCaller(t.Context(), caller{peer: peer{trusted: true}, clientAuth: true})
	h.Handle(authed, bypass)
	if got := testutil.ToFloat64(m.Bypasses); got != 1 {
		t.Errorf("an authenticated bypass: dsguard_bypass_total = %v, want 1", got)
	}
}

// TestDaemonSetHandler_NodeNamesOnlyToAuthenticatedCallers: a verdict names
// the skipped nodes only to a caller with a verified client certificate; any
// other caller learns how many, not which.
func TestDaemonSetHandler_NodeNamesOnlyToAuthenticatedCallers(t *testing.T) {
	h, _, _ := newTestHandler(t, "")
	cp := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-secret-name", Labels: map[string]string{
		"node-role.kubernetes.io/control-plane": "", "kubernetes.io/os": "linux", "kubernetes.io/hostname": "cp-secret-name"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}}
	worker := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"kubernetes.io/os": "linux"}}}
	snap := coverage.NewNodeSnapshot([]*corev1.Node{cp, worker})
	h.nodes = func() *coverage.NodeSnapshot { return snap }
	req := request(t, admissionv1.Create, compliantDS(noTolerations), nil)

	anonymous := h.Handle(t.Context(), req)
	if anonymous.Allowed || strings.Contains(anonymous.Result.Message, "cp-secret-name") ||
		!strings.Contains(anonymous.Result.Message, "skips 1 node (1 of 2 nodes)") {
		t.Errorf("unauthenticated caller: want a deny that counts the node without naming it, got:\n%s", anonymous.Result.Message)
	}
	authed := h.Handle(withCaller(t.Context(), caller{peer: peer{trusted: true}, clientAuth: true}), req)
	if authed.Allowed || !strings.Contains(authed.Result.Message, "skips cp-secret-name (1 of 2 nodes)") {
		t.Errorf("authenticated caller: want the node named, got:\n%s", authed.Result.Message)
	}
}

// TestDaemonSetHandler_ExemptionGate: with exemptions.allowedGroups set, an
// exemption or intended coverage that a request adds or changes is refused
// unless the requester is in one of the groups, whatever would soften a deny
// (the rule's action, the enforcement override, an unchanged spec,
// ratcheting); one the request leaves unchanged holds, so the two-step
// self-exemption (add it to a compliant DaemonSet, then drop the
// tolerations) fails at its first step.
func TestDaemonSetHandler_ExemptionGate(t *testing.T) {
	const (
		gated  = "exemptions:\n  grantedByRBAC: false\n  allowedGroups: [platform-team]\n"
		grant  = "migrating; expires=2026-12-31"
		renew  = "migrating; expires=2027-01-31"
		refuse = "dsguard refuses the change to annotation exempt.dsguard.io/control-plane-toleration: only members of " +
			"platform-team may add or change exemption and intended-coverage annotations (exemptions.allowedGroups), and alice is not one."
	)
	intended := func(reason string) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) {
			ds.Annotations = map[string]string{"coverage.dsguard.io/intended": reason}
		}
	}
	tests := []struct {
		name     string
		policy   string // after the gate
		op       admissionv1.Operation
		obj, old *appsv1.DaemonSet
		member   bool // the requester is in platform-team
		allowed  bool
		says     string // in the deny message, or in a warning when admitted
		recorded bool   // the exemption is recorded as an audit annotation
	}{
		{name: "CREATE with an exemption by an outsider", op: admissionv1.Create,
			obj: compliantDS(noTolerations, exempt("control-plane-toleration", grant)), says: refuse},
		{name: "CREATE with an exemption by a member", op: admissionv1.Create, member: true,
			obj: compliantDS(noTolerations, exempt("control-plane-toleration", grant)), allowed: true, recorded: true},
		{name: "step 1 of the two-step by an outsider: add to a compliant DaemonSet", op: admissionv1.Update,
			obj: compliantDS(exempt("control-plane-toleration", grant)), old: compliantDS(), says: refuse},
		{name: "step 1 under enforcement: warn", policy: "enforcement: warn\n", op: admissionv1.Update,
			obj: compliantDS(exempt("control-plane-toleration", grant)), old: compliantDS(), says: refuse},
		{name: "step 1 for a warn rule", policy: "rules:\n  control-plane-toleration: {action: warn}\n", op: admissionv1.Update,
			obj: compliantDS(exempt("control-plane-toleration", "we know")), old: compliantDS(), says: "exempt.dsguard.io/control-plane-toleration"},
		{name: "step 1 with ratcheting off", policy: "ratcheting: false\n", op: admissionv1.Update,
			obj: compliantDS(exempt("control-plane-toleration", grant)), old: compliantDS(), says: refuse},
		{name: "step 2 after a member's step 1: drop the tolerations, leave the exemption", op: admissionv1.Update,
			obj: compliantDS(noTolerations, exempt("control-plane-toleration", grant)),
			old: compliantDS(exempt("control-plane-toleration", grant)), allowed: true, recorded: true},
		{name: "renewal by an outsider", op: admissionv1.Update,
			obj: compliantDS(noTolerations, exempt("control-plane-toleration", renew)),
			old: compliantDS(noTolerations, exempt("control-plane-toleration", grant)), says: refuse},
		{name: "renewal by a member", op: admissionv1.Update, member: true,
			obj: compliantDS(noTolerations, exempt("control-plane-toleration", renew)),
			old: compliantDS(noTolerations, exempt("control-plane-toleration", grant)), allowed: true, recorded: true},
		{name: "removal by an outsider", op: admissionv1.Update,
			obj: compliantDS(), old: compliantDS(exempt("control-plane-toleration", grant)), allowed: true},
		{name: "intended coverage added by an outsider", op: admissionv1.Update,
			obj: compliantDS(intended("GPU nodes only")), old: compliantDS(), says: "annotation coverage.dsguard.io/intended"},
		{name: "intended coverage left unchanged by an outsider", op: admissionv1.Update,
			obj: compliantDS(latestImage, intended("GPU nodes only")), old: compliantDS(intended("GPU nodes only")), allowed: true},
		{name: "a break-glass user is not gated", policy: "bypass: {users: [alice]}\n", op: admissionv1.Update,
			obj: compliantDS(exempt("control-plane-toleration", grant)), old: compliantDS(), allowed: true},
		{name: "a fail-open namespace only warns, and the exemption is void for the request", op: admissionv1.Create,
			obj: compliantDS(noTolerations, inNamespace("kube-system"), exempt("control-plane-toleration", grant)), allowed: true,
			says: "exemption from control-plane-toleration is void: only members of platform-team may add or change"},
		{name: "a fail-open namespace warns of the gate", op: admissionv1.Update,
			obj: compliantDS(inNamespace("kube-system"), exempt("control-plane-toleration", grant)), old: compliantDS(), allowed: true,
			says: "dsguard would refuse the change to annotation exempt.dsguard.io/control-plane-toleration: alice is not in " +
				"exemptions.allowedGroups (platform-team); admitted: namespace kube-system fails open"},
		{name: "a fail-open namespace warns of the gate under namespaceEnforcement: audit too",
			policy: "namespaceEnforcement: [{namespaces: [\"*\"], enforcement: audit}]\n", op: admissionv1.Update,
			obj: compliantDS(inNamespace("kube-system"), exempt("control-plane-toleration", grant)), old: compliantDS(), allowed: true,
			says: "dsguard would refuse the change to annotation exempt.dsguard.io/control-plane-toleration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, _ := newTestHandler(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"+gated+tt.policy)
			h.FailOpenNamespaces = DefaultFailOpenNamespaces
			var old any
			if tt.old != nil {
				tt.old.Namespace = tt.obj.Namespace
				old = tt.old
			}
			req := request(t, tt.op, tt.obj, old)
			if tt.member {
				req.UserInfo.Groups = append(req.UserInfo.Groups, "platform-team")
			}
			resp := h.Handle(t.Context(), req)
			expectVerdict(t, resp, tt.allowed, tt.says)
			if got := resp.AuditAnnotations["control-plane-toleration"] != ""; got != tt.recorded {
				t.Errorf("exemption recorded = %v, want %v (%v)", got, tt.recorded, resp.AuditAnnotations)
			}
		})
	}
}

func TestHeavyLane(t *testing.T) {
	l := newHeavyLane(1)
	release, err := l.enter(laneContext(t), peer{}, HeavyWork+1)
	if err != nil {
		t.Fatalf("heavy work in an empty lane: %v", err)
	}
	if r, err := l.enter(laneContext(t), peer{}, HeavyWork); err != nil {
		t.Fatalf("light work must pass while the lane is full: %v", err)
	} else {
		r()
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.enter(ctx, peer{}, HeavyWork+1); err == nil {
		t.Fatal("heavy work entered a full lane")
	}
	release()
	if r, err := l.enter(laneContext(t), peer{}, HeavyWork+1); err != nil {
		t.Fatalf("after release: %v", err)
	} else {
		r()
	}
}

// TestDaemonSetHandler_ExemptionGrantedByRBAC: by default the cluster's
// authorizer decides who may grant an exemption (asked once per request,
// and only when one is written), and nobody may write one through
// daemonsets/status, where the API server keeps the old spec but stores the
// new metadata: a later UPDATE would see it unchanged and trust it.
func TestDaemonSetHandler_ExemptionGrantedByRBAC(t *testing.T) {
	const (
		grant = "migrating; expires=2026-12-31"
		cpt   = "exempt.dsguard.io/control-plane-toleration"
	)
	relabel := func(ds *appsv1.DaemonSet) { ds.Annotations = map[string]string{"example.com/owner": "team-a"} }
	tests := []struct {
		name     string
		policy   string
		status   bool // through daemonsets/status
		obj, old *appsv1.DaemonSet
		admin    bool // the requester may grant (RBAC)
		failing  bool // the authorizer cannot be asked
		forged   bool // client authentication is on and the caller has none
		allowed  bool
		asked    int    // how often the authorizer is asked
		says     string // in the deny message, or in a warning when admitted
	}{
		{name: "a tenant adds an exemption", obj: compliantDS(exempt("control-plane-toleration", grant)), old: compliantDS(), asked: 1,
			says: "dsguard refuses the change to annotation " + cpt + ": only cluster admins and whoever RBAC allows to create " +
				`exemptions.dsguard.io named "monitoring" in namespace dsguard-system (a RoleBinding there to ClusterRole dsguard-exemption-granter) ` +
				"may add or change exemption and intended-coverage annotations (exemptions.grantedByRBAC), and alice is not one of them.\n" +
				"  fix: ask one of them to apply it"},
		{name: "an admin adds it and drops the tolerations at once", admin: true, asked: 1, allowed: true,
			obj: compliantDS(noTolerations, exempt("control-plane-toleration", grant)), old: compliantDS()},
		{name: "a tenant leaves an admin's exemption and drops the tolerations", allowed: true,
			obj: compliantDS(noTolerations, exempt("control-plane-toleration", grant)), old: compliantDS(exempt("control-plane-toleration", grant))},
		{name: "the authorizer cannot answer: refused, saying so", failing: true, asked: 1,
			obj: compliantDS(exempt("control-plane-toleration", grant)), old: compliantDS(), says: "dsguard could not ask the API server: connection refused"},
		{name: "an unauthenticated caller where the API server authenticates: refused, nobody asked", forged: true, admin: true,
			obj: compliantDS(exempt("control-plane-toleration", grant)), old: compliantDS(), says: "the review does not come from an authenticated API server"},
		{name: "a tenant in a fail-open namespace: a warning, and the exemption void", asked: 1, allowed: true,
			obj: compliantDS(inNamespace("kube-system"), noTolerations, exempt("control-plane-toleration", grant)), old: compliantDS(inNamespace("kube-system")),
			says: "dsguard would refuse the change to annotation " + cpt + ": alice may not grant exemptions here (exemptions.grantedByRBAC); admitted: namespace kube-system fails open"},
		{name: "through daemonsets/status even an admin is refused", status: true, admin: true,
			obj: compliantDS(exempt("control-plane-toleration", grant)), old: compliantDS(),
			says: "dsguard refuses the change to annotation " + cpt + " through the status subresource: exemption and intended-coverage " +
				"annotations are written by an update of the DaemonSet itself"},
		{name: "through daemonsets/status another annotation passes", status: true, obj: compliantDS(relabel), old: compliantDS(), allowed: true},
		{name: "through daemonsets/status a removal passes", status: true, obj: compliantDS(), old: compliantDS(exempt("control-plane-toleration", grant)), allowed: true},
		{name: "through daemonsets/status in a fail-open namespace: a warning", status: true, allowed: true,
			obj: compliantDS(inNamespace("kube-system"), exempt("control-plane-toleration", grant)), old: compliantDS(inNamespace("kube-system")),
			says: "dsguard would refuse the change to annotation " + cpt + " through the status subresource"},
		{name: "through daemonsets/status when anyone may grant", policy: "exemptions: {grantedByRBAC: false}\n", status: true, allowed: true,
			obj: compliantDS(exempt("control-plane-toleration", grant)), old: compliantDS()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, _ := newTestHandler(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"+tt.policy)
			h.FailOpenNamespaces = DefaultFailOpenNamespaces
			h.ClientAuth = tt.forged
			asked := 0
			h.MayGrant = func(_ context.Context, u authenticationv1.UserInfo, namespace string) (bool, error) {
				asked++
				if u.Username != "alice" || namespace != tt.obj.Namespace {
					t.Errorf("asked whether %s may grant in %s; want alice in %s", u.Username, namespace, tt.obj.Namespace)
				}
				if tt.failing {
					return false, errors.New("connection refused")
				}
				return tt.admin, nil
			}
			h.Grantors = func(namespace string) string {
				return policy.GrantorsPhrase(ownNamespace, namespace, "dsguard-exemption-granter")
			}
			req := request(t, admissionv1.Update, tt.obj, tt.old)
			if tt.status {
				req.SubResource = "status"
			}
			expectVerdict(t, h.Handle(t.Context(), req), tt.allowed, tt.says)
			if asked != tt.asked {
				t.Errorf("the authorizer was asked %d times, want %d", asked, tt.asked)
			}
		})
	}
}

// expectVerdict fails unless resp admits as allowed says, with says in its
// deny message or, when admitted, in its warnings.
func expectVerdict(t *testing.T, resp admission.Response, allowed bool, says string) {
	t.Helper()
	msg := strings.Join(resp.Warnings, "\n")
	if !resp.Allowed {
		msg = resp.Result.Message
	}
	if resp.Allowed != allowed {
		t.Fatalf("allowed = %v, want %v:\n%s", resp.Allowed, allowed, msg)
	}
	if !strings.Contains(msg, says) {
		t.Errorf("want %q in:\n%s", says, msg)
	}
}
