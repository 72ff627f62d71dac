package webhook

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/internal/testobj"
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
	withFit := benchHandler(b, 5000)
	cluster := benchFitCluster(b, 5000, 10)
	withFit.Fit = func() *fit.Cluster { return cluster }
	body := apiserverReviews(b)["apiserver-review-01"]
	noop := admission.HandlerFunc(func(_ context.Context, _ admission.Request) admission.Response {
		return admission.Allowed("")
	})
	for _, c := range []struct {
		name    string
		handler http.Handler
	}{{"no-op", &admission.Webhook{Handler: noop}}, {"dsguard-in-admission.Webhook", &admission.Webhook{Handler: h}},
		{"dsguard", h.HTTPHandler()}, {"dsguard-with-fit-10-pods-per-node", withFit.HTTPHandler()}} {
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

// benchFitCluster is the fit view of testobj.CloudNodes(nodes), each node
// with allocatable room and podsPerNode Pods of ten workloads bound to it.
func benchFitCluster(b *testing.B, nodes, podsPerNode int) *fit.Cluster {
	b.Helper()
	bl := fit.NewBuilder()
	for i, n := range testobj.CloudNodes(nodes) {
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
			corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
		bl.AddNode(n)
		for j := range podsPerNode {
			if err := bl.AddPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("w-%d-%d", j, i),
				Labels: map[string]string{"app": fmt.Sprintf("w-%d", j)}},
				Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return bl.Build()
}
