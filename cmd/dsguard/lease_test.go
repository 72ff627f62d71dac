package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/audit"
)

// TestAuditLeaseTiming_RefusedAtStart: what client-go's leader election
// would refuse once the manager runs is refused by serve before it starts,
// naming the flags; the defaults and controller-runtime's timing pass.
func TestAuditLeaseTiming_RefusedAtStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		timing auditLeaseTiming
		want   string // in the error; "" for none
	}{
		{"the defaults", auditLeaseTiming{audit.DefaultLeaseDuration, audit.DefaultRenewDeadline, audit.DefaultRetryPeriod}, ""},
		{"controller-runtime's", auditLeaseTiming{15 * time.Second, 10 * time.Second, 2 * time.Second}, ""},
		{"renew deadline as long as the lease", auditLeaseTiming{10 * time.Second, 10 * time.Second, time.Second}, "must be less than --audit-lease-duration"},
		{"renew deadline inside the jittered retry", auditLeaseTiming{60 * time.Second, 12 * time.Second, 10 * time.Second}, "must be more than 1.2 × --audit-lease-retry-period"},
		{"a zero retry period", auditLeaseTiming{60 * time.Second, 40 * time.Second, 0}, "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.timing.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
