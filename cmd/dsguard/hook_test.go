package main

import (
	"errors"
	"strings"
	"testing"
)

// The words of the API server's answer when a webhook cannot be called
// (as the API server's dispatcher words them) lead to the likely cause.
func TestLikelyCause(t *testing.T) {
	for _, tc := range []struct {
		answer string
		want   string
	}{
		{`Internal error occurred: failed calling webhook "daemonsets.dsguard.io": failed to call webhook: Post "https://dsguard.dsguard-system.svc:443/validate-daemonset?timeout=5s": context deadline exceeded`,
			"GKE private clusters"},
		{`failed calling webhook "daemonsets.dsguard.io": failed to call webhook: Post "https://10.4.0.7:9443/validate-daemonset?timeout=5s": dial tcp 10.4.0.7:9443: i/o timeout`,
			"hostNetwork=true"},
		{`failed calling webhook "daemonsets.dsguard.io": failed to call webhook: Post "https://dsguard.dsguard-system.svc:443/validate-daemonset?timeout=5s": tls: failed to verify certificate: x509: certificate signed by unknown authority`,
			"caBundle does not match"},
		{`failed calling webhook "daemonsets.dsguard.io": failed to call webhook: Post "https://dsguard.dsguard-system.svc:443/validate-daemonset?timeout=5s": no endpoints available for service "dsguard"`,
			"no dsguard replica is ready"},
		{`failed calling webhook "daemonsets.dsguard.io": failed to call webhook: Post "https://dsguard.dsguard-system.svc:443/validate-daemonset?timeout=5s": dial tcp 10.96.12.1:443: connect: connection refused`,
			"NetworkPolicy"},
		{"the DaemonSet was admitted without a word from dsguard: the webhook configuration does not send default to dsguard",
			"admissions\\.enforcer/disabled"},
		{"daemonsets.apps is forbidden: User cannot create resource", ""},
	} {
		got := likelyCause(errors.New(tc.answer))
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("likelyCause(%q) = %q, want it to name %q", tc.answer, got, tc.want)
		}
	}
	if likelyCause(nil) != "" {
		t.Error("likelyCause(nil) names a cause")
	}
}
