package webhook

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/coverage"
)

// apiserverReviews returns the AdmissionReviews a real kube-apiserver sent
// (the fuzz corpus, recorded by test/e2e/capture), by file name.
func apiserverReviews(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/fuzz/FuzzDaemonSetReview/apiserver-review-*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded reviews (%v)", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// A corpus file is "go test fuzz v1" and one []byte("...") line.
		_, entry, _ := strings.Cut(string(data), "\n")
		entry = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(entry), "[]byte("), ")")
		body, err := strconv.Unquote(entry)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = []byte(body)
	}
	return out
}

// countingHandler counts the requests it passes on.
type countingHandler struct {
	next  http.Handler
	calls atomic.Int32
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.calls.Add(1)
	c.next.ServeHTTP(w, r)
}

func serve(t testing.TB, h http.Handler, body []byte, contentType string) admissionv1.AdmissionReview {
	t.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, DaemonSetPath, bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	h.ServeHTTP(rec, r)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("HTTP %d, the answer is no AdmissionReview (%v): %s", rec.Code, err, rec.Body.String())
	}
	return out
}

// diffNodes are a few nodes that make node-coverage and the live form of
// control-plane-toleration speak.
func diffNodes() *coverage.NodeSnapshot {
	return coverage.NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "cp-1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"kubernetes.io/os": "linux"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"kubernetes.io/os": "linux"}}},
	})
}

// TestHTTPHandler_AnswersAsControllerRuntime sends the reviews a real API
// server sent, and requests made to take every turn of the one-pass decode,
// through HTTPHandler and through controller-runtime's admission.Webhook
// around the same handler: the answers must be equal, and the reviews an API
// server sends must be taken by the one-pass decode (not handed on).
func TestHTTPHandler_AnswersAsControllerRuntime(t *testing.T) {
	h, _, _ := newTestHandler(t, "")
	h.nodes = diffNodes
	slow := &countingHandler{next: &admission.Webhook{Handler: h}}
	fast := newReviewHandler(h, slow)
	reference := &admission.Webhook{Handler: h}

	review := func(req admission.Request, mutate ...func(map[string]any)) []byte {
		data := reviewBody(t, req)
		if len(mutate) == 0 {
			return data
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		for _, f := range mutate {
			f(m)
		}
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	reqOf := func(m map[string]any) map[string]any { return m["request"].(map[string]any) }
	object := func(m map[string]any) map[string]any { return reqOf(m)["object"].(map[string]any) }
	pod := request(t, admissionv1.Create, &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "monitoring"}}, nil)
	update := request(t, admissionv1.Update, compliantDS(noTolerations, relabel), compliantDS(noTolerations))
	updateSpec := request(t, admissionv1.Update, compliantDS(noTolerations, latestImage), compliantDS(latestImage))

	bodies := map[string][]byte{}
	taken := map[string]bool{}
	for name, body := range apiserverReviews(t) {
		bodies[name], taken[name] = body, true
	}
	for name, c := range map[string]struct {
		body  []byte
		taken bool
	}{
		"create, compliant":                    {review(request(t, admissionv1.Create, compliantDS(), nil)), true},
		"create, denied":                       {review(request(t, admissionv1.Create, compliantDS(noTolerations, halfFleet), nil)), true},
		"update, labels only":                  {review(update), true},
		"update, new violation":                {review(updateSpec), true},
		"create in a fail-open namespace":      {review(request(t, admissionv1.Create, compliantDS(inNamespace("kube-system"), noTolerations), nil)), true},
		"create in dsguard's namespace":        {review(request(t, admissionv1.Create, compliantDS(inNamespace(ownNamespace)), nil)), true},
		"delete":                               {review(request(t, admissionv1.Delete, nil, compliantDS())), false},
		"update without the old object":        {review(request(t, admissionv1.Update, compliantDS(), nil)), false},
		"a Pod as the object":                  {review(pod), false},
		"object of another kind":               {review(request(t, admissionv1.Create, compliantDS(), nil), func(m map[string]any) { object(m)["kind"] = "Deployment" }), false},
		"object of another version":            {review(request(t, admissionv1.Create, compliantDS(), nil), func(m map[string]any) { object(m)["apiVersion"] = "apps/v1beta2" }), false},
		"object without apiVersion and kind":   {review(request(t, admissionv1.Create, compliantDS(), nil), func(m map[string]any) { delete(object(m), "apiVersion"); delete(object(m), "kind") }), true},
		"object that does not decode":          {review(request(t, admissionv1.Create, compliantDS(), nil), func(m map[string]any) { object(m)["spec"] = "x" }), false},
		"undecodable in a fail-open namespace": {review(request(t, admissionv1.Create, compliantDS(inNamespace("kube-system")), nil), func(m map[string]any) { object(m)["spec"] = 1 }), false},
		"null object":                          {review(request(t, admissionv1.Create, compliantDS(), nil), func(m map[string]any) { reqOf(m)["object"] = nil }), false},
		"v1beta1 review":                       {review(request(t, admissionv1.Create, compliantDS(), nil), func(m map[string]any) { m["apiVersion"] = "admission.k8s.io/v1beta1" }), false},
		"review without apiVersion":            {review(request(t, admissionv1.Create, compliantDS(), nil), func(m map[string]any) { delete(m, "apiVersion") }), false},
		"field names in another case":          {review(request(t, admissionv1.Create, compliantDS(), nil), func(m map[string]any) { object(m)["Spec"] = object(m)["spec"]; delete(object(m), "spec") }), true},
		"review without request":               {[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), false},
		"malformed JSON":                       {[]byte(`{"request": {`), false},
	} {
		bodies[name], taken[name] = c.body, c.taken
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			before := slow.calls.Load()
			got := serve(t, fast, body, "application/json")
			if handedOn := slow.calls.Load() > before; handedOn == taken[name] {
				t.Errorf("handed on to admission.Webhook: %v, want %v", handedOn, !taken[name])
			}
			want := serve(t, reference, body, "application/json")
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("answers differ:\none pass:           %s\nadmission.Webhook: %s", g, w)
			}
		})
	}
}

// TestServer_ServesRecordedReviews sends the reviews a real API server sent
// through the hardened server (TLS, the connection guard, the body read
// whole before the handler) to HTTPHandler, which must take each one's
// body as the server read it, and answer as admission.Webhook does.
func TestServer_ServesRecordedReviews(t *testing.T) {
	h, _, _ := newTestHandler(t, "")
	h.nodes = diffNodes
	slow := &countingHandler{next: &admission.Webhook{Handler: h}}
	reference := &admission.Webhook{Handler: h}
	var buffered atomic.Int32
	pki := newTestPKI(t)
	addr := startTestServer(t, pki, ServerOptions{}, nil, func(srv *Server) {
		srv.Register(DaemonSetPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := r.Body.(*bufferedBody); ok {
				buffered.Add(1)
			}
			newReviewHandler(h, slow).ServeHTTP(w, r)
		}))
	})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}}
	defer client.CloseIdleConnections()
	reviews := apiserverReviews(t)
	for name, body := range reviews {
		resp, err := client.Post("https://"+addr+DaemonSetPath, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: the answer is no AdmissionReview: %v", name, err)
		}
		if want := serve(t, reference, body, "application/json"); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: answers differ:\nserved:            %+v\nadmission.Webhook: %+v", name, got.Response, want.Response)
		}
	}
	if int(buffered.Load()) != len(reviews) || slow.calls.Load() != 0 {
		t.Errorf("%d of %d bodies reached the handler as the server read them, %d were handed on; want all, none",
			buffered.Load(), len(reviews), slow.calls.Load())
	}
}

func TestReadBody(t *testing.T) {
	tests := []struct {
		name          string
		size          int
		contentLength int64
		wantLen       int
	}{
		{"ordinary review", 12 << 10, 12 << 10, 12 << 10},
		{"no Content-Length", 12 << 10, -1, 12 << 10},
		{"Content-Length larger than the body", 100, 7 << 20, 100},
		{"above the preallocation", 300 << 10, 300 << 10, 300 << 10},
		{"past the limit: one byte more than it", maxReviewBytes + 10, maxReviewBytes + 10, maxReviewBytes + 1},
		{"empty", 0, 0, 0},
	}
	// One buffer for every case, as the pool hands buffers from request
	// to request: a body never carries bytes of the one before.
	var buf bytes.Buffer
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := bytes.Repeat([]byte(tt.name[:1]), tt.size)
			got, err := readBody(&buf, bytes.NewReader(data), tt.contentLength)
			if err != nil || len(got) != tt.wantLen || !bytes.Equal(got, data[:tt.wantLen]) {
				t.Fatalf("read %d bytes (%v), want the first %d", len(got), err, tt.wantLen)
			}
			if tt.contentLength > 0 && tt.contentLength == int64(tt.size) && tt.size <= maxBodyPrealloc && cap(got) > tt.size+bytes.MinRead {
				t.Errorf("the buffer grew to %d for a body of %d whose length was announced", cap(got), tt.size)
			}
		})
	}
}

// TestHTTPHandler_DecoderEdgeCases feeds the one-pass decode the JSON on
// which decoders are known to part ways (duplicate names, invalid UTF-8,
// nulls in typed places, numbers in other forms, escaped names, trailing
// data): whether it takes such a review or hands it on, the answer must be
// admission.Webhook's.
func TestHTTPHandler_DecoderEdgeCases(t *testing.T) {
	h, _, _ := newTestHandler(t, "")
	h.nodes = diffNodes
	served, reference := h.HTTPHandler(), &admission.Webhook{Handler: h}
	tests := []struct {
		name     string
		mutate   []func(*appsv1.DaemonSet)
		old, new string // the first old in the body becomes new; no old: new is appended
	}{
		{"duplicate name in the object's metadata", nil, `"name":"node-exporter"`, `"name":"other","name":"node-exporter"`},
		{"duplicate spec, the first empty", []func(*appsv1.DaemonSet){noTolerations}, `"spec":{`, `"spec":{},"spec":{`},
		{"duplicate tolerations, the later empty", nil, `"tolerations":[{"operator":"Exists"}]`, `"tolerations":[{"operator":"Exists"}],"tolerations":[]`},
		{"duplicate operation", nil, `"operation":"CREATE"`, `"operation":"DELETE","operation":"CREATE"`},
		{"invalid UTF-8 in a label value", nil, `"labels":{"app":"ne"}`, "\"labels\":{\"app\":\"ne\",\"x\":\"\xff\xfe\"}"},
		{"a lone surrogate escaped in a label value", nil, `"labels":{"app":"ne"}`, `"labels":{"app":"ne","x":"\ud800"}`},
		{"an escaped field name", []func(*appsv1.DaemonSet){noTolerations}, `"spec":{`, `"\u0073pec":{`},
		{"a field name in another case beside the right one", nil, `"spec":{`, `"Spec":{"template":{"spec":{"hostNetwork":true}}},"spec":{`},
		{"null label value", nil, `"labels":{"app":"ne"}`, `"labels":{"app":"ne","x":null}`},
		{"null tolerations", nil, `"tolerations":[{"operator":"Exists"}]`, `"tolerations":null`},
		{"empty tolerations", nil, `"tolerations":[{"operator":"Exists"}]`, `"tolerations":[]`},
		{"null in the tolerations", nil, `"tolerations":[{"operator":"Exists"}]`, `"tolerations":[null,{"operator":"Exists"}]`},
		{"null maxUnavailable", nil, `"maxUnavailable":1`, `"maxUnavailable":null`},
		{"fractional maxUnavailable", nil, `"maxUnavailable":1`, `"maxUnavailable":1.5`},
		{"maxUnavailable with an exponent", nil, `"maxUnavailable":1`, `"maxUnavailable":1e0`},
		{"minReadySeconds with an exponent", nil, `"spec":{`, `"spec":{"minReadySeconds":1e1,`},
		{"minReadySeconds as 1.0", nil, `"spec":{`, `"spec":{"minReadySeconds":1.0,`},
		{"minReadySeconds as -0", nil, `"spec":{`, `"spec":{"minReadySeconds":-0,`},
		{"minReadySeconds beyond int32", nil, `"spec":{`, `"spec":{"minReadySeconds":4294967296,`},
		{"minReadySeconds as a string", nil, `"spec":{`, `"spec":{"minReadySeconds":"5",`},
		{"hostNetwork as a string", nil, `"tolerations":`, `"hostNetwork":"true","tolerations":`},
		{"a timestamp as a number", nil, `"name":"node-exporter"`, `"name":"node-exporter","creationTimestamp":5`},
		{"a timestamp that is no time", nil, `"name":"node-exporter"`, `"name":"node-exporter","creationTimestamp":"yesterday"`},
		{"a null timestamp", nil, `"name":"node-exporter"`, `"name":"node-exporter","creationTimestamp":null`},
		{"a null resource quantity", nil, `"image":`, `"resources":{"limits":{"cpu":null}},"image":`},
		{"a resource quantity that is no quantity", nil, `"image":`, `"resources":{"limits":{"cpu":"lots"}},"image":`},
		{"null request", nil, `"request":{`, `"request":null,"x":{`},
		{"the object is an array", nil, `"object":{`, `"object":[],"x":{`},
		{"unknown fields", nil, `"spec":{`, `"spec":{"x":{"y":[1,2,{"z":null}]},`},
		{"a byte order mark first", nil, `{`, "\ufeff{"},
		{"data after the review", nil, "", ` x`},
		{"two reviews", nil, "", `{}`},
		{"whitespace around the review", nil, `{`, " \n\t{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := reviewBody(t, request(t, admissionv1.Create, compliantDS(tt.mutate...), nil))
			if tt.old == "" {
				body = append(body, tt.new...)
			} else {
				if !bytes.Contains(body, []byte(tt.old)) {
					t.Fatalf("%s is not in the review: %s", tt.old, body)
				}
				body = bytes.Replace(body, []byte(tt.old), []byte(tt.new), 1)
			}
			if got, want := serveBody(served, body), serveBody(reference, body); !bytes.Equal(got, want) {
				t.Errorf("answers differ:\none pass:           %s\nadmission.Webhook: %s", got, want)
			}
		})
	}
}

// reviewBody is the JSON of a v1 AdmissionReview of req, as an API server
// sends it.
func reviewBody(t testing.TB, req admission.Request) []byte {
	t.Helper()
	data, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}
