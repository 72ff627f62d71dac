package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The correctness halves of the security benchmarks
// (security_bench_test.go): what the answers must be, whatever the machine's
// speed. The benchmarks keep the timing targets.

// TestHandle_WorstCaseAffinityIsDenied: the 10,000-term × 5-value
// DaemonSet at 5,000 nodes is denied, by placement-size, with a 403.
func TestHandle_WorstCaseAffinityIsDenied(t *testing.T) {
	h := benchHandler(t, 5000)
	// Bounded: should the heavy lane never let it in, the review ends with
	// its context and the test fails on the answer instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp := h.Handle(ctx, reviewRequest(t, worstCaseDS(), true))
	if resp.Allowed {
		t.Fatal("the worst-case object was admitted")
	}
	if resp.Result == nil || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, "[placement-size]") {
		t.Fatalf("want a 403 from placement-size, got %+v", resp.Result)
	}
}

// TestDryRunFlood_CompliantReviewsAreAdmitted: while 8 clients send the
// worst-case object in a loop, every compliant review is answered, and
// admitted, and no worst-case review is admitted (each is denied or turned
// away as busy).
func TestDryRunFlood_CompliantReviewsAreAdmitted(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of 1 MB reviews")
	}
	f := newFloodTarget(t, newTestPKI(t))
	worst, ok := dryRunBody(t, worstCaseDS()), dryRunBody(t, compliantDS())
	counts, stop := f.flood(8, worst)
	defer stop()
	answered := func() int64 { return counts.denied.Load() + counts.admitted.Load() + counts.refused.Load() }
	// The compliant reviews are sent once the flood has been answered at
	// least once, and go on until the flood has been answered twice more
	// times, so that they met it; both waits have their own bound.
	deadline := time.Now().Add(time.Minute)
	for answered() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no worst-case review answered within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	first := answered()
	compliant := 0
	for compliant < 20 || answered() < first+2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d compliant reviews while the flood was answered %d more times in a minute", compliant, answered()-first)
		}
		resp, _, err := f.send(ok)
		if err != nil {
			t.Fatalf("compliant review %d during the flood: %v", compliant+1, err)
		}
		if !resp.Allowed {
			t.Fatalf("compliant review %d during the flood refused: %+v", compliant+1, resp.Result)
		}
		compliant++
	}
	stop()
	if n := counts.admitted.Load(); n > 0 {
		t.Errorf("%d worst-case reviews admitted", n)
	}
	t.Logf("%d compliant reviews admitted while %d worst-case reviews were denied and %d refused as busy",
		compliant, counts.denied.Load(), counts.refused.Load())
}
