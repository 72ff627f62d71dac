package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

func TestDirectSlices(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{100 * time.Millisecond, 2}, {time.Second, 2}, {2 * time.Second, 2}, {5 * time.Second, 6}, {8 * time.Second, 8}, {9 * time.Second, 10}} {
		if got := directSlices(c.d); got != c.want {
			t.Errorf("directSlices(%s) = %d, want %d", c.d, got, c.want)
		}
	}
}

// TestDirectPair checks that the two webhooks take turns, the first of each
// pair of turns alternating, and that each one's figures are its own.
func TestDirectPair(t *testing.T) {
	var mu sync.Mutex
	var order []string // the target of each request, in arrival order
	server := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			order = append(order, name)
			// b refuses every third review.
			allowed := name == "a" || len(order)%3 != 0
			mu.Unlock()
			_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{Response: &admissionv1.AdmissionResponse{Allowed: allowed}})
		}))
	}
	a, b := server("a"), server("b")
	defer a.Close()
	defer b.Close()
	cpu := func(per time.Duration) func() (time.Duration, error) {
		var used time.Duration
		return func() (time.Duration, error) { used += per; return used, nil }
	}
	targets := []*directTarget{
		{name: "a", url: a.URL, client: a.Client(), cpuTime: cpu(time.Millisecond)},
		{name: "b", url: b.URL, client: b.Client(), cpuTime: cpu(3 * time.Millisecond)},
	}
	const d = 5 * 40 * time.Millisecond
	steps, err := directPair(context.Background(), targets, []byte("{}"), 1, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].target != "a" || steps[1].target != "b" {
		t.Fatalf("steps %+v, want one for a, then one for b", steps)
	}
	if steps[0].requests == 0 || steps[0].failed != 0 || steps[0].throughput <= 0 {
		t.Errorf("a: %+v, want answered requests and none failed", steps[0])
	}
	// Each slice reads the CPU time twice: a's 1 ms steps make 1 ms per
	// slice over its requests.
	if want := time.Duration(directSlices(d)) * time.Millisecond / time.Duration(steps[0].requests); steps[0].cpuPerRequest != want {
		t.Errorf("a: CPU per request %s, want %s", steps[0].cpuPerRequest, want)
	}
	if steps[1].failed == 0 {
		t.Errorf("b: %+v, want its refusals counted as failed", steps[1])
	}
	if want := time.Duration(directSlices(d)) * 3 * time.Millisecond / time.Duration(steps[1].requests+steps[1].failed); steps[1].cpuPerRequest != want {
		t.Errorf("b: CPU per request %s, want %s", steps[1].cpuPerRequest, want)
	}

	// The warm-up (a, then b), then the slices: a b, b a. Without the
	// alternation the last turn would be b's.
	mu.Lock()
	defer mu.Unlock()
	var runs []string
	for _, name := range order {
		if len(runs) == 0 || runs[len(runs)-1] != name {
			runs = append(runs, name)
		}
	}
	want := []string{"a", "b", "a", "b", "a"}
	if len(runs) != len(want) {
		t.Fatalf("turns %v, want %v", runs, want)
	}
	for i := range want {
		if runs[i] != want[i] {
			t.Fatalf("turns %v, want %v", runs, want)
		}
	}
}
