package webhook

import (
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
)

// TestDaemonSetHandler_StaleNodeView: a managed cluster has no node with the
// control-plane taint, so with a fresh node view a DaemonSet that does not
// tolerate it is only warned. Once the view is past its bound (the API server
// out of reach), the rule falls back to its offline form, which denies, and
// both the deny message and a warning say the verdict was reached without
// live nodes.
func TestDaemonSetHandler_StaleNodeView(t *testing.T) {
	workers := coverage.NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"kubernetes.io/os": "linux"}}},
	})
	for _, tc := range []struct {
		name       string
		stale      time.Duration
		allowed    bool
		inMessage  string
		firstWarn  string
		notInWarns string
	}{
		{name: "fresh", allowed: true, notInWarns: "node view"},
		{name: "stale", stale: 3*time.Minute + 400*time.Millisecond, allowed: false,
			inMessage: "(judged without live nodes: dsguard's node view is 3m0s old)",
			firstWarn: "dsguard: node view 3m0s old (API server out of reach): node rules judged without live nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, _ := newTestHandler(t, "")
			h.nodes = func() *coverage.NodeSnapshot { return workers }
			h.nodesStale = func() time.Duration { return tc.stale }
			resp := h.Handle(t.Context(), request(t, admissionv1.Create, compliantDS(noTolerations), nil))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %+v %v", resp.Allowed, tc.allowed, resp.Result, resp.Warnings)
			}
			if tc.inMessage != "" && !strings.Contains(resp.Result.Message, tc.inMessage) {
				t.Errorf("deny message lacks %q:\n%s", tc.inMessage, resp.Result.Message)
			}
			if tc.firstWarn != "" && (len(resp.Warnings) == 0 || resp.Warnings[0] != tc.firstWarn) {
				t.Errorf("warnings = %q, want first %q", resp.Warnings, tc.firstWarn)
			}
			for _, w := range resp.Warnings {
				if tc.notInWarns != "" && strings.Contains(w, tc.notInWarns) {
					t.Errorf("unexpected warning %q", w)
				}
			}
		})
	}
}
