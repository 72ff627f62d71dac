package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/coverage"
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
	}{
		{
			name: "a deny becomes a warning in calico-system (the built-in policy warns there too)",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Create, compliantDS(noTolerations, inNamespace("calico-system")), nil)
			},
			allowed: true, code: http.StatusOK, warningHas: "control-plane-toleration: no toleration", wantResult: "warned",
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

	authed := context.WithValue(t.Context(), authenticatedKey{}, true)
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
	authed := h.Handle(context.WithValue(t.Context(), authenticatedKey{}, true), req)
	if authed.Allowed || !strings.Contains(authed.Result.Message, "skips cp-secret-name (1 of 2 nodes)") {
		t.Errorf("authenticated caller: want the node named, got:\n%s", authed.Result.Message)
	}
}

// TestDaemonSetHandler_ExemptionGate: the request's user decides whether an
// exemption it adds takes effect.
func TestDaemonSetHandler_ExemptionGate(t *testing.T) {
	h, _, _ := newTestHandler(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nexemptions:\n  allowedGroups: [platform-team]\n")
	exempted := compliantDS(noTolerations, exempt("control-plane-toleration", "migrating; expires=2026-12-31"))
	req := request(t, admissionv1.Create, exempted, nil)
	if resp := h.Handle(t.Context(), req); resp.Allowed ||
		!strings.Contains(strings.Join(resp.Warnings, "\n"), "alice may not grant it: only members of platform-team may") {
		t.Errorf("alice (not in platform-team): want the deny to stand and a warning why, got allowed=%v warnings=%q", resp.Allowed, resp.Warnings)
	}
	req.UserInfo.Groups = append(req.UserInfo.Groups, "platform-team")
	if resp := h.Handle(t.Context(), req); !resp.Allowed || resp.AuditAnnotations["control-plane-toleration"] == "" {
		t.Errorf("a platform-team member: want admitted with the exemption recorded, got allowed=%v audit=%v", resp.Allowed, resp.AuditAnnotations)
	}
	// A later UPDATE by someone else that keeps the exemption as it is.
	update := request(t, admissionv1.Update, compliantDS(noTolerations, latestImage, exempt("control-plane-toleration", "migrating; expires=2026-12-31")), exempted)
	if resp := h.Handle(t.Context(), update); !resp.Allowed {
		t.Errorf("an UPDATE that leaves the granted exemption unchanged: want admitted, got %s", resp.Result.Message)
	}
}

func TestHeavyLane(t *testing.T) {
	l := newHeavyLane(1)
	release, err := l.enter(t.Context(), peer{}, HeavyWork+1)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := l.enter(t.Context(), peer{}, HeavyWork); err != nil {
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
	if r, err := l.enter(t.Context(), peer{}, HeavyWork+1); err != nil {
		t.Fatalf("after release: %v", err)
	} else {
		r()
	}
}
