package webhook

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// BenchmarkDaemonSetWebhook is one AdmissionReview a real API server sent
// (kubectl create of a DaemonSet, managed fields included) at 5,000 nodes,
// without TLS or the network, through: a no-op handler in
// controller-runtime's admission.Webhook (the floor), dsguard's handler in
// admission.Webhook (as dsguard served before), and HTTPHandler, which
// dsguard serves. The difference to the floor is what dsguard adds per
// request.
func BenchmarkDaemonSetWebhook(b *testing.B) {
	h := benchHandler(b, 5000)
	body := apiserverReviews(b)["apiserver-review-01"]
	noop := admission.HandlerFunc(func(_ context.Context, _ admission.Request) admission.Response {
		return admission.Allowed("")
	})
	for _, c := range []struct {
		name    string
		handler http.Handler
	}{{"no-op", &admission.Webhook{Handler: noop}}, {"dsguard-in-admission.Webhook", &admission.Webhook{Handler: h}},
		{"dsguard", h.HTTPHandler()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodPost, DaemonSetPath, bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				c.handler.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
