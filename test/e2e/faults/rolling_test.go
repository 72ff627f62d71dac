package faults

import (
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRollingRestart_NoFailedAdmissions replaces both replicas one after the
// other, as `kubectl rollout restart` does (a new replica ready, the old one
// out of the endpoints, then SIGTERM), while reviews flow through the API
// server with failurePolicy Fail: not one may fail.
func TestRollingRestart_NoFailedAdmissions(t *testing.T) {
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), "dsguard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if w.Name == "daemonsets.dsguard.io" && (w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail) {
			t.Fatalf("%s: failurePolicy %v, want Fail (a failed call must count)", w.Name, w.FailurePolicy)
		}
	}

	rs := cluster.Replicas()
	l := startLoad(t.Context(), "reviews during the rolling restart", 4, 10*time.Millisecond, nil,
		deniedByDsguard(example(t, "node-exporter.yaml", "default")))
	// The sleeps here pace the restart under the load: reviews before,
	// between and after the replacements, as a rollout has them.
	time.Sleep(2 * time.Second)
	for _, old := range rs.Members() {
		start := time.Now()
		replacement, err := rs.Replace(t.Context(), old)
		if err != nil {
			l.stop(t)
			t.Fatal(err)
		}
		t.Logf("figures: %s replaced by %s in %s", old.Name, replacement.Name, time.Since(start).Round(time.Millisecond))
		if err := old.ExitError(); err != nil {
			t.Errorf("%s did not shut down cleanly: %v", old.Name, err)
		}
		time.Sleep(time.Second)
	}
	time.Sleep(2 * time.Second)
	l.stop(t)
}
