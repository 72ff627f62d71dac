package main

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestOverheadInterval checks the bootstrap interval against samples whose
// true ratio is known: creates of 3 ms plus noise without a webhook, and
// fixed overheads on top for the no-op webhook and the measured one.
func TestOverheadInterval(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	samples := func(n int, over time.Duration) latencies {
		l := make(latencies, n)
		for i := range l {
			l[i] = 3*time.Millisecond + over + time.Duration(rng.NormFloat64()*float64(300*time.Microsecond))
		}
		return l
	}
	interval := func(s string) (lo, hi float64) {
		if _, err := fmt.Sscanf(s, " (%f–%f×)", &lo, &hi); err != nil {
			t.Fatalf("interval %q: %v", s, err)
		}
		return lo, hi
	}
	for _, c := range []struct {
		name   string
		over   time.Duration // the measured webhook's overhead; the no-op's is 1 ms
		n      int
		within float64 // the interval must be narrower than this
	}{
		{"same overhead", time.Millisecond, 1000, 0.2},
		{"a fifth more", 1200 * time.Microsecond, 1000, 0.2},
		{"half as much", 500 * time.Microsecond, 1000, 0.2},
		// 30 creates per mode, as at 65,000 nodes: the interval must
		// still hold the true ratio, however wide.
		{"30 samples", time.Millisecond, 30, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, noop, m := samples(c.n, 0), samples(c.n, time.Millisecond), samples(c.n, c.over)
			lo, hi := interval(overheadInterval(base, noop, m))
			want := float64(c.over) / float64(time.Millisecond)
			if lo > want || hi < want {
				t.Errorf("interval %.2f–%.2f misses the true ratio %.2f", lo, hi, want)
			}
			if hi-lo > c.within {
				t.Errorf("interval %.2f–%.2f is wider than %.2f", lo, hi, c.within)
			}
			if again := overheadInterval(base, noop, m); again != overheadInterval(base, noop, m) {
				t.Errorf("the same samples gave two intervals")
			}
		})
	}
	t.Run("no-op overhead indistinguishable from none", func(t *testing.T) {
		base := samples(200, 0)
		if got := overheadInterval(base, samples(200, 0), samples(200, time.Millisecond)); got != "" {
			t.Errorf("got %q, want no interval", got)
		}
	})
	t.Run("no samples", func(t *testing.T) {
		if got := overheadInterval(nil, nil, nil); got != "" {
			t.Errorf("got %q, want no interval", got)
		}
	})
}
