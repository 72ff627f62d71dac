package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/policy"
)

// TestDaemonSetWebhook_BadInput sends malformed HTTP requests through the
// handler the server serves (HTTPHandler, which hands what it does not take
// to controller-runtime's admission.Webhook): each must get a well-formed
// AdmissionReview error (or a 4xx), never a panic or an allow.
func TestDaemonSetWebhook_BadInput(t *testing.T) {
	h, _, _ := newTestHandler(t, "")
	wh := h.HTTPHandler()
	configMapReq := request(t, admissionv1.Create, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, nil)
	configMapReq.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	noUID := request(t, admissionv1.Create, compliantDS(), nil)
	noUID.UID = ""
	tests := []struct {
		name        string
		body        []byte
		contentType string
		code        int32
		msgContains string
	}{
		{"malformed JSON", []byte(`{"request": {`), "application/json", http.StatusBadRequest, "unexpected"},
		{"wrong content type", reviewBody(t, request(t, admissionv1.Create, compliantDS(), nil)), "text/plain", http.StatusBadRequest, "expected application/json"},
		{"empty body", nil, "application/json", http.StatusBadRequest, "request body is empty"},
		{"oversized body", bytes.Repeat([]byte("x"), 8<<20), "application/json", http.StatusRequestEntityTooLarge, "too large"},
		{"non-DaemonSet object", reviewBody(t, configMapReq), "application/json", http.StatusBadRequest, "dsguard validates apps/v1 DaemonSets"},
		{"missing request UID", reviewBody(t, noUID), "application/json", http.StatusBadRequest, "no UID"},
		{"review without request", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), "application/json", http.StatusBadRequest, "no UID"},
		{"JSON array", []byte(`[1,2,3]`), "application/json", http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body *bytes.Reader
			if tt.body != nil {
				body = bytes.NewReader(tt.body)
			}
			var req *http.Request
			if body == nil {
				req = httptest.NewRequest(http.MethodPost, DaemonSetPath, http.NoBody)
			} else {
				req = httptest.NewRequest(http.MethodPost, DaemonSetPath, body)
			}
			req.Header.Set("Content-Type", tt.contentType)
			rec := httptest.NewRecorder()
			wh.ServeHTTP(rec, req)
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("response is not an AdmissionReview: %v: %s", err, rec.Body.String())
			}
			if out.Response == nil || out.Response.Allowed {
				t.Fatalf("want a refusal, got %+v", out.Response)
			}
			if out.Response.Result.Code != tt.code {
				t.Errorf("code = %d, want %d (%s)", out.Response.Result.Code, tt.code, out.Response.Result.Message)
			}
			if !strings.Contains(out.Response.Result.Message, tt.msgContains) {
				t.Errorf("message %q lacks %q", out.Response.Result.Message, tt.msgContains)
			}
		})
	}
}

func TestWarningLines_Limits(t *testing.T) {
	var many []policy.Finding
	for i := range 40 {
		many = append(many, policy.Finding{RuleID: "readiness-probe", Action: policy.ActionWarn,
			Message: fmt.Sprintf("container %q has no readinessProbe: numberReady only means \"started\"", fmt.Sprint("c", i))})
	}
	long := policy.Finding{RuleID: "image-pinned", Action: policy.ActionWarn, Message: strings.Repeat("very long ", 60) + "\nsecond line"}

	lines := warningLines(append([]policy.Finding{long}, many...))
	total := 0
	for _, l := range lines {
		if len(l) > maxWarningLen {
			t.Errorf("warning longer than %d: %d", maxWarningLen, len(l))
		}
		if strings.Contains(l, "\n") {
			t.Errorf("warning with a newline would be dropped by the API server: %q", l)
		}
		total += len(l)
	}
	if total > 4096 {
		t.Errorf("warnings total %d characters, past the API server's 4096", total)
	}
	if !strings.HasPrefix(lines[0], "image-pinned: very long") || !strings.HasSuffix(lines[0], "...") {
		t.Errorf("first warning = %q, want the long one, cut", lines[0])
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "dsguard: ") || !strings.Contains(last, "more warnings not shown") {
		t.Errorf("last warning = %q, want a summary of the rest", last)
	}
	if warningLines(nil) != nil {
		t.Error("no findings: want no warnings")
	}
}

// TestOneLine checks oneLine's shortcut for messages already on one line
// against what it stands for: the words joined by single spaces.
func TestOneLine(t *testing.T) {
	for _, s := range []string{
		"", " ", "a", "a b", "a  b", " a", "a ", "a\nb", "a\tb", "a\u00a0b", "a\u2028b", "a \n b",
		"max-unavailable: maxUnavailable 50% is above the 25% cap", "caf\xe9 au lait", "\xff \xfe",
		strings.Repeat("word ", 100) + "end",
	} {
		want := strings.Join(strings.Fields(s), " ")
		if len(want) > maxWarningLen {
			want = want[:maxWarningLen-3] + "..."
		}
		if got := oneLine(s); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", s, got, want)
		}
	}
}
