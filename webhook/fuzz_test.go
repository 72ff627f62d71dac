package webhook

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/coverage"
)

// FuzzDaemonSetReview sends arbitrary bodies through the same path the
// webhook server serves (HTTPHandler's one-pass decode, or
// controller-runtime's admission.Webhook for what it hands on, then the
// DaemonSet handler, with a live node set), and through admission.Webhook
// alone: both must answer alike. The corpus in
// testdata/fuzz/FuzzDaemonSetReview holds AdmissionReviews a real
// kube-apiserver sent for kubectl create, apply, server-side apply and dry
// runs of the examples (see test/e2e/capture). Whatever the body: the answer
// is an AdmissionReview, no panic is hidden behind an error answer, a verdict
// echoes the request's UID, and a deny says why.
func FuzzDaemonSetReview(f *testing.F) {
	h, _, _ := newTestHandler(f, "")
	h.nodes = func() *coverage.NodeSnapshot {
		return coverage.NewNodeSnapshot([]*corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "cp-1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"kubernetes.io/os": "linux"}}},
		})
	}
	// Panics must reach the handler's own recovery (and this fuzzer), not
	// controller-runtime's.
	reference := (&admission.Webhook{Handler: h}).WithRecoverPanic(false)
	// The differential compares the one-pass decode with admission.Webhook
	// only for bodies the one-pass decode answers itself; what it hands on
	// is compared with itself. Count both, and require the corpus to reach
	// the one-pass decode (the fuzzing workers, other processes, count their
	// own).
	var total, handedOn atomic.Int64
	wh := newReviewHandler(h, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handedOn.Add(1)
		reference.ServeHTTP(w, r)
	}))
	f.Cleanup(func() {
		if fuzzing := flag.Lookup("test.fuzz"); fuzzing != nil && fuzzing.Value.String() != "" {
			return
		}
		fast := total.Load() - handedOn.Load()
		f.Logf("%d inputs: %d answered by the one-pass decode, %d handed on to admission.Webhook", total.Load(), fast, handedOn.Load())
		if fast == 0 {
			f.Errorf("none of %d inputs reached the one-pass decode: the differential compared admission.Webhook with itself", total.Load())
		}
	})
	for _, req := range []admission.Request{
		request(f, admissionv1.Create, compliantDS(), nil),
		request(f, admissionv1.Create, compliantDS(noTolerations, halfFleet, latestImage), nil),
		request(f, admissionv1.Update, compliantDS(noTolerations, relabel), compliantDS(noTolerations)),
		request(f, admissionv1.Create, compliantDS(inNamespace("kube-system"), noTolerations), nil),
	} {
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request:  &req.AdmissionRequest,
		})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		total.Add(1)
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, DaemonSetPath, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		wh.ServeHTTP(rec, r)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("HTTP %d, the answer is no AdmissionReview (%v): %s", rec.Code, err, rec.Body.String())
		}
		if want := serveBody(reference, body); !bytes.Equal(rec.Body.Bytes(), want) {
			t.Fatalf("the one-pass decode answers\n%s\nadmission.Webhook answers\n%s", rec.Body.Bytes(), want)
		}
		resp := out.Response
		text := strings.Join(resp.Warnings, "\n")
		if resp.Result != nil {
			text += "\n" + resp.Result.Message
		}
		if strings.Contains(text, "internal error in dsguard") {
			t.Fatalf("the handler panicked: %s", text)
		}
		verdict := resp.Allowed || resp.Result != nil && resp.Result.Code == http.StatusForbidden
		if verdict && resp.UID == "" {
			t.Fatalf("a verdict without the request's UID: %+v", resp)
		}
		if !resp.Allowed && (resp.Result == nil || resp.Result.Message == "") {
			t.Fatalf("refused without a reason: %+v", resp)
		}
	})
}

// serveBody returns h's answer to body.
func serveBody(h http.Handler, body []byte) []byte {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, DaemonSetPath, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, r)
	return rec.Body.Bytes()
}
