package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// BenchmarkDaemonSetWebhook is one AdmissionReview through the real
// controller-runtime webhook wrapper (decode, evaluate, respond), without
// TLS or the network, against a no-op handler on the same path: the
// difference is what dsguard adds per request.
func BenchmarkDaemonSetWebhook(b *testing.B) {
	t := &testing.T{}
	h, _, _ := newTestHandler(t, "")
	req := request(t, admissionv1.Create, compliantDS(), nil)
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
	if err != nil {
		b.Fatal(err)
	}
	noop := admission.HandlerFunc(func(_ context.Context, _ admission.Request) admission.Response {
		return admission.Allowed("")
	})
	for _, c := range []struct {
		name    string
		handler admission.Handler
	}{{"no-op", noop}, {"dsguard", h}} {
		b.Run(c.name, func(b *testing.B) {
			wh := &admission.Webhook{Handler: c.handler}
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodPost, DaemonSetPath, bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				wh.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
