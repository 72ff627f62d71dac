package main

import (
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestSoftMemoryLimit(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    int64
		set     bool
		wantErr bool
	}{
		{name: "no limit", env: nil},
		{name: "256 MiB limit", env: map[string]string{memoryLimitEnv: "268435456"}, want: 241591860, set: true},
		{name: "GOMEMLIMIT set by hand wins", env: map[string]string{"GOMEMLIMIT": "100MiB", memoryLimitEnv: "268435456"}},
		{name: "not a number", env: map[string]string{memoryLimitEnv: "256Mi"}, wantErr: true},
		{name: "zero", env: map[string]string{memoryLimitEnv: "0"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, set, err := softMemoryLimit(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr || set != tt.set || got != tt.want {
				t.Errorf("softMemoryLimit() = %d, %v, %v; want %d, %v, error %v", got, set, err, tt.want, tt.set, tt.wantErr)
			}
		})
	}
}

// TestCollectAfterStartup: the collector's target is startupGCPercent until
// the first list of nodes is built, and what it was afterwards; a GOGC set
// by hand is never touched.
func TestCollectAfterStartup(t *testing.T) {
	const before = 150
	defer debug.SetGCPercent(debug.SetGCPercent(before))
	// Read through runtime/metrics: reading it by setting it would race
	// with the goroutine that restores it.
	current := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}

	built := make(chan struct{})
	collectAfterStartup(t.Context(), logr.Discard(), built, func(string) string { return "" })
	if got := current(); got != startupGCPercent {
		t.Fatalf("while listing: GC percent %d, want %d", got, startupGCPercent)
	}
	close(built)
	deadline := time.Now().Add(10 * time.Second)
	for current() != before {
		if time.Now().After(deadline) {
			t.Fatalf("after the first list: GC percent %d, want %d back", current(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}

	collectAfterStartup(t.Context(), logr.Discard(), make(chan struct{}), func(k string) string {
		if k == "GOGC" {
			return "200"
		}
		return ""
	})
	if got := current(); got != before {
		t.Errorf("GOGC set by hand: GC percent %d, want it untouched (%d)", got, before)
	}
}
