package clusterview

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPolicySource_KeepsTheLastGoodPolicy: an invalid document leaves the
// active policy in force, marks the source degraded and is counted; a good
// one clears the mark and bumps the generation.
func TestPolicySource_KeepsTheLastGoodPolicy(t *testing.T) {
	m := NewPolicyMetrics(prometheus.NewRegistry())
	src := NewPolicySource(m)
	const good = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"
	if err := src.Load([]byte(good), "v1"); err != nil {
		t.Fatal(err)
	}
	if err := src.Load([]byte(good+"enforcement: block\n"), "v2"); err == nil {
		t.Fatal("an invalid policy loaded without error")
	}
	if got := src.Current(); got.Origin != "v1" || got.Generation != 1 {
		t.Errorf("active policy = %s generation %d, want v1 generation 1", got.Origin, got.Generation)
	}
	if src.Degraded() == nil || testutil.ToFloat64(m.PolicyDegraded) != 1 {
		t.Error("an invalid policy must mark the source degraded")
	}
	if got := testutil.ToFloat64(m.PolicyReloads.WithLabelValues("invalid")); got != 1 {
		t.Errorf("invalid reloads = %v, want 1", got)
	}
	if err := src.Load([]byte(good), "v3"); err != nil {
		t.Fatal(err)
	}
	if src.Degraded() != nil || testutil.ToFloat64(m.PolicyDegraded) != 0 || testutil.ToFloat64(m.PolicyGeneration) != 2 {
		t.Errorf("after a good load: degraded %v, gauge %v, generation %v", src.Degraded(),
			testutil.ToFloat64(m.PolicyDegraded), testutil.ToFloat64(m.PolicyGeneration))
	}
}

// TestPolicySource_ChangedClosesOnEveryNewPolicy: the channel Changed
// hands out is closed by each new active policy, whichever way it came,
// and by nothing else: a rejected document that leaves the active policy
// in force is no change.
func TestPolicySource_ChangedClosesOnEveryNewPolicy(t *testing.T) {
	const good = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"
	src := NewPolicySource(nil)
	for _, step := range []struct {
		name    string
		do      func() error
		changes bool
	}{
		{"the first document", func() error { return src.Load([]byte(good), "v1") }, true},
		{"a rejected document", func() error {
			if src.Load([]byte(good+"enforcement: block\n"), "v2") == nil {
				t.Error("an invalid policy loaded without error")
			}
			return nil
		}, false},
		{"a good document", func() error { return src.Load([]byte(good+"enforcement: warn\n"), "v3") }, true},
		{"a refresh", src.Refresh, true},
		{"the last good document", func() error { return src.LoadLastGood([]byte(good), "last good", nil) }, true},
		{"the defaults", func() error { src.UseDefaults("test"); return nil }, true},
	} {
		changed := src.Changed()
		before := src.Current()
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		select {
		case <-changed:
			if !step.changes {
				t.Errorf("%s closed the channel; the active policy is still generation %d", step.name, src.Current().Generation)
			}
			if src.Current() == before {
				t.Errorf("%s closed the channel before a new policy was active", step.name)
			}
		default:
			if step.changes {
				t.Errorf("%s made generation %d active without closing the channel", step.name, src.Current().Generation)
			}
		}
	}
}
