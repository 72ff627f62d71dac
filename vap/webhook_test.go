package vap

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/webhook"
)

// webhookHandler is dsguard's own DaemonSet handler, the reference the
// generated policies are held to, serving p: without live nodes (the
// generated policies judge placements against the model nodes, as the
// engine does offline), judging expiries on testDay (the day the tests
// render for), with opts' namespace as its own and opts' fail-open
// namespaces.
func webhookHandler(t testing.TB, p *policy.Policy, opts Options) *webhook.DaemonSetHandler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	src := clusterview.NewPolicySource(nil)
	src.Activate(p, nil, "test")
	h := webhook.NewDaemonSetHandler(scheme, src, nil, opts.Namespace, nil)
	h.Now = func() time.Time { return testDay }
	h.FailOpenNamespaces = opts.FailOpenNamespaces
	h.MayGrant = func(_ context.Context, u authenticationv1.UserInfo, namespace string) (bool, error) {
		return mayGrant(u.Username, opts.Namespace, policy.GrantVerb, policy.GrantGroup, policy.GrantResource, opts.Namespace, namespace), nil
	}
	h.Grantors = func(namespace string) string {
		return policy.GrantorsPhrase(opts.Namespace, namespace, opts.GranterRole)
	}
	return h
}

// admissionRequest is r as the API server sends it to a webhook.
func (r request) admissionRequest(t testing.TB) admission.Request {
	t.Helper()
	encode := func(ds *appsv1.DaemonSet) runtime.RawExtension {
		obj := ds.DeepCopy()
		obj.Namespace = r.namespace
		obj.APIVersion, obj.Kind = "apps/v1", "DaemonSet"
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "5e1d0c3a-0000-4000-8000-000000000001",
		Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"},
		Namespace: r.namespace,
		Name:      r.object.Name,
		Operation: admissionv1.Create,
		UserInfo:  authenticationv1.UserInfo{Username: r.user, Groups: r.groups},
		Object:    encode(r.object),
	}}
	if r.old != nil {
		req.Operation, req.OldObject = admissionv1.Update, encode(r.old)
	}
	req.SubResource = r.subresource
	return req
}

// webhookVerdict is the handler's answer to r: deny, warn or allow, with
// the deny message or the warnings. An answer that is not a verdict (an
// error of the handler's own) fails the test.
func webhookVerdict(t testing.TB, h *webhook.DaemonSetHandler, r request) (string, []string) {
	t.Helper()
	// The handler logs through the request's context, as the webhook
	// server gives it; the tests do not read it.
	resp := h.Handle(logf.IntoContext(t.Context(), logr.Discard()), r.admissionRequest(t))
	switch {
	case !resp.Allowed && resp.Result != nil && resp.Result.Code == http.StatusForbidden:
		return "deny", []string{resp.Result.Message}
	case !resp.Allowed:
		t.Fatalf("the webhook answered no verdict: %+v", resp.Result)
	case len(resp.Warnings) > 0:
		return "warn", resp.Warnings
	}
	return "allow", nil
}
