package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// apiServerBodyLimit is the largest request body the API server accepts: the
// largest Node a person (or a forger) can put in a review.
const apiServerBodyLimit = 3 << 20

// BenchmarkNodeReview compares the cost of one Node review through the
// entry's handler (decode included) with 300 DaemonSets: a small change
// (one taint) beside the largest Node the API server accepts, as many
// taints as fit in its 3 MiB body limit. The bounds keep the second at the
// cost of decoding it.
func BenchmarkNodeReview(b *testing.B) {
	var f nodeChangeFixture
	for i := range 300 {
		f.dss = append(f.dss, agent(fmt.Sprintf("agent-%03d", i), tolerating()))
		f.withPod = append(f.withPod, f.dss[i].Name)
	}
	small := workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoSchedule))
	largest := workerNode()
	for i := 0; ; i++ {
		largest.Spec.Taints = append(largest.Spec.Taints, corev1.Taint{Key: fmt.Sprintf("example.com/forged-%06d", i), Effect: corev1.TaintEffectNoSchedule})
		if i%1000 == 0 {
			if data, _ := json.Marshal(largest); len(data) > apiServerBodyLimit-(64<<10) {
				break
			}
		}
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
	}{{"small", small}, {"largest-3MiB", largest}} {
		b.Run(tc.name, func(b *testing.B) {
			h, _ := newNodeChangeHandler(b, "", f)
			body := nodeReviewBody(b, workerNode(), tc.node)
			hook := h.HTTPHandler()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, NodePath+"?timeout=2s", bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				hook.ServeHTTP(w, r.WithContext(fromAPIServer(r.Context())))
				if w.Code != http.StatusOK {
					b.Fatalf("HTTP %d: %s", w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(len(tc.node.Spec.Taints)), "taints")
		})
	}
	// The floor: decoding the largest review and its two Nodes, nothing
	// judged. The entry's cost at the largest Node is this plus its bounded
	// work, so the ratio of largest-3MiB to it says what the bounds leave.
	b.Run("decode-only-3MiB", func(b *testing.B) {
		body := nodeReviewBody(b, workerNode(), largest)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var review admissionv1.AdmissionReview
			var before, after corev1.Node
			if json.Unmarshal(body, &review) != nil || json.Unmarshal(review.Request.Object.Raw, &after) != nil ||
				json.Unmarshal(review.Request.OldObject.Raw, &before) != nil {
				b.Fatal("the review does not decode")
			}
		}
		b.ReportMetric(float64(len(largest.Spec.Taints)), "taints")
	})
}

func nodeReviewBody(b *testing.B, before, after *corev1.Node) []byte {
	b.Helper()
	raw := func(n *corev1.Node) runtime.RawExtension {
		data, err := json.Marshal(n)
		if err != nil {
			b.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "bench", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: before.Name,
			Operation: admissionv1.Update, Object: raw(after), OldObject: raw(before)}}
	data, err := json.Marshal(review)
	if err != nil {
		b.Fatal(err)
	}
	return data
}
