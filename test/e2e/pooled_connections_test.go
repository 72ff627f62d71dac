package e2e

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes"
)

// TestBurstsOfReviews_PooledConnectionsAreJudged: in a burst, the API
// server's transport dials new connections to dsguard; those a request did
// not wait for stay in its pool and carry their first review only in a later
// burst, seconds after the handshake. dsguard paces a body from when its
// request arrives, so every review of every burst is judged, none refused
// as slow (a 408). The reviews are larger than what is read with the
// headers, as most DaemonSets' are.
func TestBurstsOfReviews_PooledConnectionsAreJudged(t *testing.T) {
	kube, err := kubernetes.NewForConfig(cluster.Config())
	if err != nil {
		t.Fatal(err)
	}
	through, err := cluster.ThroughDsguard(kube, func(ds *appsv1.DaemonSet) {
		ds.Annotations = map[string]string{"example.com/notes": strings.Repeat("n", 24<<10)}
	})
	if err != nil {
		t.Fatal(err)
	}
	const bursts, width = 6, 24
	var judged, failed atomic.Int64
	var last atomic.Value
	for b := range bursts {
		if b > 0 {
			// Longer than the body grace (2 s): a connection dialed in
			// the previous burst and left in the pool is past it.
			time.Sleep(3 * time.Second)
		}
		var wg sync.WaitGroup
		for range width {
			wg.Go(func() {
				if err := through(t.Context()); err != nil {
					failed.Add(1)
					last.Store(err)
					return
				}
				judged.Add(1)
			})
		}
		wg.Wait()
	}
	t.Logf("%d bursts of %d reviews: %d judged, %d failed", bursts, width, judged.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d of %d reviews were not judged; last: %v", failed.Load(), bursts*width, last.Load())
	}
}
