package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/clusterview"
)

const ownNamespace = "dsguard-system"

// compliantDS tolerates everything, is probed, pinned and rolls one node at a time.
func compliantDS(mutate ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "node-exporter", Namespace: "monitoring", Labels: map[string]string{"app": "ne"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ne"}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "ne"}},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: "node-exporter", Image: "quay.io/prometheus/node-exporter:v1.9.1",
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(9100)}}},
					}},
				},
			},
		},
	}
	for _, m := range mutate {
		m(ds)
	}
	return ds
}

func noTolerations(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = nil }
func halfFleet(ds *appsv1.DaemonSet) {
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("50%"))
}
func latestImage(ds *appsv1.DaemonSet) {
	ds.Spec.Template.Spec.Containers[0].Image = "example/agent:latest"
}
func relabel(ds *appsv1.DaemonSet) { ds.Labels["team"] = "observability" }
func inNamespace(ns string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Namespace = ns }
}
func exempt(rule, reason string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Annotations = map[string]string{"exempt.dsguard.io/" + rule: reason}
	}
}

func raw(t testing.TB, obj any) runtime.RawExtension {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

func request(t testing.TB, op admissionv1.Operation, obj, old any) admission.Request {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       types.UID("4f0a1c3e-0000-4000-8000-000000000001"),
		Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"},
		Namespace: "monitoring",
		Name:      "node-exporter",
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}},
	}}
	if ds, ok := obj.(*appsv1.DaemonSet); ok {
		req.Namespace = ds.Namespace
	}
	if obj != nil {
		req.Object = raw(t, obj)
	}
	if old != nil {
		req.OldObject = raw(t, old)
	}
	return req
}

// testServing is what every handler under test is made of: the client-go
// scheme, fresh metrics, and policyYAML loaded (the defaults when empty).
func testServing(t testing.TB, policyYAML string) (*runtime.Scheme, *clusterview.PolicySource, *Metrics) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	src := clusterview.NewPolicySource(nil)
	if policyYAML == "" {
		src.UseDefaults("test")
	} else if err := src.Load([]byte(policyYAML), "test"); err != nil {
		t.Fatal(err)
	}
	return scheme, src, NewMetrics(prometheus.NewRegistry())
}

func newTestHandler(t testing.TB, policyYAML string) (*DaemonSetHandler, *clusterview.PolicySource, *Metrics) {
	t.Helper()
	scheme, src, m := testServing(t, policyYAML)
	h := NewDaemonSetHandler(scheme, src, m, ownNamespace, nil)
	h.Now = func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }
	h.MayGrant = clusterAdminsMayGrant
	return h, src, m
}

// clusterAdminsMayGrant is the tests' authorizer: members of system:masters
// may grant exemptions, as RBAC lets cluster admins.
func clusterAdminsMayGrant(_ context.Context, u authenticationv1.UserInfo, _ string) (bool, error) {
	return slices.Contains(u.Groups, "system:masters"), nil
}

// asClusterAdmin is r by a cluster admin.
func asClusterAdmin(r admission.Request) admission.Request {
	r.UserInfo.Groups = append(r.UserInfo.Groups, "system:masters")
	return r
}

const cpDeny = "[control-plane-toleration] spec.template.spec.tolerations: no toleration for " +
	"node-role.kubernetes.io/control-plane:NoSchedule: skips every node with that taint, unseen in desiredNumberScheduled\n" +
	"  fix: add to spec.template.spec.tolerations: {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}"

const halfFleetWarning = "max-unavailable: maxUnavailable 50% is above the 25% cap: a rollout may blind 50% of the nodes at once"

func TestDaemonSetHandler_Handle(t *testing.T) {
	dryRun := func(r admission.Request) admission.Request { r.DryRun = ptr.To(true); return r }
	tests := []struct {
		name        string
		req         func(t *testing.T) admission.Request
		allowed     bool
		code        int32
		message     string // exact, "" for none
		msgContains string
		warnings    []string
		audit       map[string]string
	}{
		{
			name:    "CREATE compliant",
			req:     func(t *testing.T) admission.Request { return request(t, admissionv1.Create, compliantDS(), nil) },
			allowed: true, code: http.StatusOK,
		},
		{
			name: "CREATE without tolerations is denied with the rule, field and fix",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Create, compliantDS(noTolerations), nil)
			},
			allowed: false, code: http.StatusForbidden,
			message: "DaemonSet monitoring/node-exporter breaks 1 dsguard coverage rule:\n" + cpDeny,
		},
		{
			name: "dry-run CREATE gets the identical verdict",
			req: func(t *testing.T) admission.Request {
				return dryRun(request(t, admissionv1.Create, compliantDS(noTolerations), nil))
			},
			allowed: false, code: http.StatusForbidden,
			message: "DaemonSet monitoring/node-exporter breaks 1 dsguard coverage rule:\n" + cpDeny,
		},
		{
			name: "CREATE with warn findings is allowed with one warning each",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Create, compliantDS(halfFleet, latestImage), nil)
			},
			allowed: true, code: http.StatusOK,
			warnings: []string{
				`image-pinned: container "node-exporter" image "example/agent:latest" uses :latest: nodes may run different builds`,
				halfFleetWarning,
			},
		},
		{
			name: "UPDATE introducing a violation is denied",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Update, compliantDS(noTolerations), compliantDS())
			},
			allowed: false, code: http.StatusForbidden,
			message: "DaemonSet monitoring/node-exporter breaks 1 dsguard coverage rule:\n" + cpDeny,
		},
		{
			name: "UPDATE of a pre-existing violation that changes only a label is allowed with a warning",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Update, compliantDS(noTolerations, relabel), compliantDS(noTolerations))
			},
			allowed: true, code: http.StatusOK,
			warnings: []string{"control-plane-toleration: no toleration for node-role.kubernetes.io/control-plane:NoSchedule: " +
				"skips every node with that taint, unseen in desiredNumberScheduled (spec unchanged by this update)"},
		},
		{
			name: "UPDATE changing the spec keeps a pre-existing violation at warn (ratcheting)",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Update, compliantDS(noTolerations, latestImage), compliantDS(noTolerations))
			},
			allowed: true, code: http.StatusOK,
			warnings: []string{
				"control-plane-toleration: no toleration for node-role.kubernetes.io/control-plane:NoSchedule: " +
					"skips every node with that taint, unseen in desiredNumberScheduled (already present before this update)",
				`image-pinned: container "node-exporter" image "example/agent:latest" uses :latest: nodes may run different builds`,
			},
		},
		{
			name: "UPDATE keeps no violation the old object had only under an exemption, now expired (no ratcheting for good)",
			req: func(t *testing.T) admission.Request {
				expired := func(ds *appsv1.DaemonSet) {
					ds.Annotations = map[string]string{"exempt.dsguard.io/control-plane-toleration": "legacy agent; expires=2000-01-01"}
				}
				return request(t, admissionv1.Update, compliantDS(noTolerations, latestImage, expired), compliantDS(noTolerations, expired))
			},
			allowed: false, code: http.StatusForbidden,
			msgContains: "[control-plane-toleration]",
			warnings: []string{`image-pinned: container "node-exporter" image "example/agent:latest" uses :latest: nodes may run different builds`,
				"invalid-annotation: exemption from control-plane-toleration expired on 2000-01-01 and no longer applies"},
		},
		{
			name: "ratcheting off denies the pre-existing violation on a spec change",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Update, compliantDS(noTolerations, latestImage), compliantDS(noTolerations))
			},
			allowed: false, code: http.StatusForbidden,
			msgContains: "breaks 1 dsguard coverage rule:\n[control-plane-toleration]",
			warnings:    []string{`image-pinned: container "node-exporter" image "example/agent:latest" uses :latest: nodes may run different builds`},
		},
		{
			name: "UPDATE with a deletionTimestamp (finalizer removal) is never denied",
			req: func(t *testing.T) admission.Request {
				deleting := compliantDS(noTolerations, latestImage, func(ds *appsv1.DaemonSet) {
					ds.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)}
				})
				return request(t, admissionv1.Update, deleting, compliantDS())
			},
			allowed: true, code: http.StatusOK,
			warnings: []string{
				"control-plane-toleration: no toleration for node-role.kubernetes.io/control-plane:NoSchedule: " +
					"skips every node with that taint, unseen in desiredNumberScheduled",
				`image-pinned: container "node-exporter" image "example/agent:latest" uses :latest: nodes may run different builds`,
			},
		},
		{
			name: "kube-system only warns by default",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Create, compliantDS(noTolerations, inNamespace("kube-system")), nil)
			},
			allowed: true, code: http.StatusOK,
			warnings: []string{"control-plane-toleration: no toleration for node-role.kubernetes.io/control-plane:NoSchedule: " +
				"skips every node with that taint, unseen in desiredNumberScheduled"},
		},
		{
			name: "dsguard's own namespace is never evaluated",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Create, compliantDS(noTolerations, inNamespace(ownNamespace)), nil)
			},
			allowed: true, code: http.StatusOK, message: "dsguard does not judge its own namespace",
		},
		{
			name: "an exempted finding becomes an audit annotation",
			req: func(t *testing.T) admission.Request {
				return asClusterAdmin(request(t, admissionv1.Create, compliantDS(noTolerations, exempt("control-plane-toleration", "control plane runs its own exporter; expires=2026-12-31")), nil))
			},
			allowed: true, code: http.StatusOK,
			audit: map[string]string{"control-plane-toleration": "no toleration for node-role.kubernetes.io/control-plane:NoSchedule: " +
				"skips every node with that taint, unseen in desiredNumberScheduled (exempted: control plane runs its own exporter)"},
		},
		{
			name: "DELETE is not judged",
			req: func(t *testing.T) admission.Request {
				return request(t, admissionv1.Delete, nil, compliantDS(noTolerations))
			},
			allowed: true, code: http.StatusOK, message: "dsguard only judges CREATE and UPDATE",
		},
		{
			name: "wrong kind is a 400",
			req: func(t *testing.T) admission.Request {
				r := request(t, admissionv1.Create, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, nil)
				r.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
				return r
			},
			allowed: false, code: http.StatusBadRequest,
			message: "dsguard validates apps/v1 DaemonSets, not /v1, Kind=ConfigMap; check the webhook configuration's rules",
		},
		{
			name: "garbage object is a 400",
			req: func(t *testing.T) admission.Request {
				r := request(t, admissionv1.Create, nil, nil)
				r.Object = runtime.RawExtension{Raw: []byte(`{"spec": "not an object"`)}
				return r
			},
			allowed: false, code: http.StatusBadRequest, msgContains: "decoding the DaemonSet",
		},
		{
			name:    "empty object is a 400",
			req:     func(t *testing.T) admission.Request { return request(t, admissionv1.Create, nil, nil) },
			allowed: false, code: http.StatusBadRequest, msgContains: "decoding the DaemonSet",
		},
		{
			name: "missing request UID is a 400",
			req: func(t *testing.T) admission.Request {
				r := request(t, admissionv1.Create, compliantDS(), nil)
				r.UID = ""
				return r
			},
			allowed: false, code: http.StatusBadRequest, message: "the admission request has no UID",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policyYAML := ""
			if strings.HasPrefix(tt.name, "ratcheting off") {
				policyYAML = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nratcheting: false\n"
			}
			h, _, _ := newTestHandler(t, policyYAML)
			resp := h.Handle(t.Context(), tt.req(t))
			if resp.Allowed != tt.allowed {
				t.Errorf("allowed = %v, want %v (%+v)", resp.Allowed, tt.allowed, resp.Result)
			}
			if resp.Result == nil || resp.Result.Code != tt.code {
				t.Fatalf("result = %+v, want code %d", resp.Result, tt.code)
			}
			if tt.msgContains == "" && resp.Result.Message != tt.message {
				t.Errorf("message =\n%s\nwant\n%s", resp.Result.Message, tt.message)
			}
			if tt.msgContains != "" && !strings.Contains(resp.Result.Message, tt.msgContains) {
				t.Errorf("message %q lacks %q", resp.Result.Message, tt.msgContains)
			}
			if strings.Join(resp.Warnings, "\n") != strings.Join(tt.warnings, "\n") {
				t.Errorf("warnings =\n%s\nwant\n%s", strings.Join(resp.Warnings, "\n"), strings.Join(tt.warnings, "\n"))
			}
			if len(resp.AuditAnnotations) != len(tt.audit) {
				t.Errorf("audit annotations = %v, want %v", resp.AuditAnnotations, tt.audit)
			}
			for k, v := range tt.audit {
				if resp.AuditAnnotations[k] != v {
					t.Errorf("audit[%s] = %q, want %q", k, resp.AuditAnnotations[k], v)
				}
			}
		})
	}
}

func TestDaemonSetHandler_PolicyChangeFlipsVerdict(t *testing.T) {
	h, src, m := newTestHandler(t, "")
	req := request(t, admissionv1.Create, compliantDS(noTolerations), nil)
	if resp := h.Handle(t.Context(), req); resp.Allowed {
		t.Fatal("built-in defaults: want deny")
	}
	warnPolicy := "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  control-plane-toleration:\n    action: warn\n"
	if err := src.Load([]byte(warnPolicy), "test v2"); err != nil {
		t.Fatal(err)
	}
	resp := h.Handle(t.Context(), req)
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], "control-plane-toleration: ") {
		t.Fatalf("after switching the rule to warn: allowed=%v warnings=%v", resp.Allowed, resp.Warnings)
	}
	// A broken policy must leave the warn policy in force.
	if err := src.Load([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  control-plane-toleration:\n    action: block\n"), "test v3"); err == nil {
		t.Fatal("invalid policy loaded without error")
	}
	if got := src.Current(); got.Origin != "test v2" || got.Generation != 2 {
		t.Errorf("active policy = %s generation %d, want test v2 generation 2", got.Origin, got.Generation)
	}
	if resp := h.Handle(t.Context(), req); !resp.Allowed {
		t.Fatal("after an invalid policy: the last good (warn) policy must stay in force")
	}
	if src.Degraded() == nil {
		t.Error("an invalid policy must mark the source degraded")
	}
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues("denied")); got != 1 {
		t.Errorf("denied decisions = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.Findings.WithLabelValues("control-plane-toleration", "warn")); got != 2 {
		t.Errorf("control-plane-toleration warn findings = %v, want 2", got)
	}
}

func TestDaemonSetHandler_Bypass(t *testing.T) {
	h, _, m := newTestHandler(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nbypass:\n  groups: [incident-responders]\n")
	req := request(t, admissionv1.Create, compliantDS(noTolerations), nil)
	if resp := h.Handle(t.Context(), req); resp.Allowed {
		t.Fatal("alice is not on the bypass list: want deny")
	}
	req.UserInfo.Groups = append(req.UserInfo.Groups, "incident-responders")
	if resp := h.Handle(t.Context(), req); !resp.Allowed {
		t.Fatal("bypass group: want allowed")
	}
	if got := testutil.ToFloat64(m.Bypasses); got != 1 {
		t.Errorf("bypass counter = %v, want 1", got)
	}
}

func TestDaemonSetHandler_NoPolicyYet(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	src := clusterview.NewPolicySource(nil)
	h := NewDaemonSetHandler(scheme, src, nil, ownNamespace, nil)
	resp := h.Handle(t.Context(), request(t, admissionv1.Create, compliantDS(), nil))
	if resp.Allowed || resp.Result.Code != http.StatusServiceUnavailable {
		t.Fatalf("before any policy: %+v", resp.Result)
	}
	if src.ReadyCheck(nil) == nil {
		t.Error("ReadyCheck must fail before a policy is loaded")
	}
	src.UseDefaults("test")
	if err := src.ReadyCheck(nil); err != nil {
		t.Errorf("ReadyCheck after defaults: %v", err)
	}
}

// TestDaemonSetHandler_DegradedPolicyIsSaidOnEveryResponse: while the policy
// source is Degraded (the ConfigMap deleted or invalid, the last good policy
// or the defaults in force), every verdict carries one warning line naming
// the policy that judged and why.
func TestDaemonSetHandler_DegradedPolicyIsSaidOnEveryResponse(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		load func(src *clusterview.PolicySource)
		want string // "" for no Degraded warning
	}{
		{"a loaded ConfigMap", func(src *clusterview.PolicySource) {
			if err := src.Load([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"), "cm"); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"the defaults, no last good policy", func(src *clusterview.PolicySource) {
			src.UseDefaultsDegraded(errors.New("dsguard-policy does not exist"), "built-in defaults (no last good policy)")
		}, "dsguard: policy Degraded, judged by built-in defaults (no last good policy): dsguard-policy does not exist"},
		{"the last good policy", func(src *clusterview.PolicySource) {
			if err := src.LoadLastGood([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"), "the last good policy",
				errors.New("dsguard-policy does not exist")); err != nil {
				t.Fatal(err)
			}
		}, "dsguard: policy Degraded, judged by the last good policy: dsguard-policy does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := clusterview.NewPolicySource(nil)
			tt.load(src)
			h := NewDaemonSetHandler(scheme, src, nil, ownNamespace, nil)
			resp := h.Handle(t.Context(), request(t, admissionv1.Create, compliantDS(), nil))
			var got []string
			for _, w := range resp.Warnings {
				if strings.Contains(w, "Degraded") {
					got = append(got, w)
				}
			}
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("Degraded warning on a healthy policy: %q", got)
			case tt.want != "" && (len(got) != 1 || got[0] != tt.want):
				t.Errorf("Degraded warnings %q, want exactly %q", got, tt.want)
			}
		})
	}
}

// TestHandle_RolloutEstimateFromThePodsOwnReadyTimes: an UPDATE that
// changes the template reads a sample of the stored DaemonSet's Pods and
// estimates the rollout's length by their time to Ready; an update that
// leaves the template alone lists no Pod.
func TestHandle_RolloutEstimateFromThePodsOwnReadyTimes(t *testing.T) {
	h, _, _ := newTestHandler(t, "")
	created := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	listed := 0
	h.PodSample = func(_ context.Context, ds *appsv1.DaemonSet) ([]corev1.Pod, error) {
		listed++
		var pods []corev1.Pod
		for _, took := range []time.Duration{8 * time.Second, 12 * time.Second, 10 * time.Second} {
			p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, CreationTimestamp: metav1.NewTime(created)}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(created.Add(took))}}
			pods = append(pods, p)
		}
		return pods, nil
	}
	old := compliantDS()
	old.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, CurrentNumberScheduled: 4, NumberAvailable: 4}
	resp := h.Handle(context.Background(), request(t, admissionv1.Update, compliantDS(relabel), old))
	if listed != 0 || !resp.Allowed {
		t.Fatalf("a label change listed Pods %d times (want 0), allowed %v", listed, resp.Allowed)
	}
	resp = h.Handle(context.Background(), request(t, admissionv1.Update, compliantDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = "quay.io/prometheus/node-exporter:v1.9.2"
	}), old))
	want := "rollout-impact: the rollout takes about 40s, an estimate: 4 rounds of about 10s per Pod (the agent's Pods took a median 10s"
	if listed != 1 || !slices.ContainsFunc(resp.Warnings, func(w string) bool { return strings.HasPrefix(w, want) }) {
		t.Errorf("listed %d times (want 1); warnings %q lack %q", listed, resp.Warnings, want)
	}
	// With client authentication on, a caller without a certificate
	// makes dsguard list nothing.
	h.ClientAuth = true
	h.Handle(context.Background(), request(t, admissionv1.Update, compliantDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = "quay.io/prometheus/node-exporter:v1.9.3"
	}), old))
	if listed != 1 {
		t.Errorf("an unauthenticated review listed Pods (%d lists in all, want still 1)", listed)
	}
	// With rollout-impact off, nothing asks for the Pods.
	off, _, _ := newTestHandler(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  rollout-impact:\n    action: off\n")
	off.PodSample = h.PodSample
	off.Handle(context.Background(), request(t, admissionv1.Update, compliantDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = "quay.io/prometheus/node-exporter:v1.9.4"
	}), old))
	if listed != 1 {
		t.Errorf("with rollout-impact off a template change listed Pods (%d lists in all, want still 1)", listed)
	}
}
