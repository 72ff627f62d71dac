package faults

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// sample is one reading of a replica's footprint.
type sample struct {
	at         time.Duration
	rss        float64 // bytes
	goroutines float64
}

// TestSoak runs everything at once for -soak (60s in `make test`, 10 minutes
// with `make soak`): reviews that must be denied and reviews that must be
// allowed, nodes joining, leaving and being relabelled, the policy reloaded
// every few seconds, and the serving certificate rotated half-way. Not one
// request may fail, and each replica's RSS and goroutine count must stay
// flat; the curve is printed.
func TestSoak(t *testing.T) {
	restorePolicy(t)
	ctx := t.Context()
	replicas := cluster.Replicas().Members()
	deadline := time.Now().Add(*soakFor)
	start := time.Now()

	denied := startLoad(ctx, "reviews that must be denied", 2, 20*time.Millisecond, nil,
		deniedByDsguard(example(t, "node-exporter.yaml", "default")))
	allowed := startLoad(ctx, "reviews that must be allowed", 1, 20*time.Millisecond, nil,
		func(ctx context.Context) error {
			v, err := review(ctx, example(t, "node-exporter-tolerations.yaml", "default"))
			if err == nil && v.denied {
				err = fmt.Errorf("denied: %s", v.message)
			}
			return err
		})

	// Node churn: a node joins, is relabelled, and leaves, over and over.
	// One the load's end caught between its create and its delete goes
	// when the test ends.
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		if err := kube.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: churnLabel}); err != nil {
			t.Errorf("cleanup: deleting the churned nodes: %v", err)
		}
	})
	churned := 0
	churn := startLoad(ctx, "node churn (create, relabel, delete)", 1, 500*time.Millisecond, nil,
		func(ctx context.Context) error {
			churned++
			name := fmt.Sprintf("churn-%d", churned)
			nodes := kube.CoreV1().Nodes()
			if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", churnLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			patch := fmt.Sprintf(`{"metadata":{"labels":{"pool":"p%d"}}}`, rand.IntN(3))
			if _, err := nodes.Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
			return nodes.Delete(ctx, name, metav1.DeleteOptions{})
		})

	// Policy reloads between two valid documents.
	reloads := 0
	policies := startLoad(ctx, "policy reloads", 1, 3*time.Second, nil, func(ctx context.Context) error {
		reloads++
		return setPolicy(ctx, policyVersion(reloads%2))
	})

	// Samples are taken every 5 seconds: the curve's pace, not a settle.
	var curves = map[string][]sample{}
	rotated := false
	var rotatedSerial int64
	for time.Now().Before(deadline) {
		for _, r := range replicas {
			rss, err1 := r.Metric("process_resident_memory_bytes")
			g, err2 := r.Metric("go_goroutines")
			if err1 != nil || err2 != nil {
				t.Errorf("%s: metrics: %v %v", r.Name, err1, err2)
				continue
			}
			curves[r.Name] = append(curves[r.Name], sample{time.Since(start), rss, g})
		}
		if !rotated && time.Since(start) > *soakFor/2 {
			serial, err := cluster.Replicas().RotateServingCert()
			if err != nil {
				t.Fatal(err)
			}
			rotated, rotatedSerial = true, serial
			t.Logf("figures: serving certificate rotated at %s (serial %d)", time.Since(start).Round(time.Second), serial)
		}
		time.Sleep(min(5*time.Second, time.Until(deadline)))
	}
	denied.stop(t)
	allowed.stop(t)
	churn.stop(t)
	policies.stop(t)

	for _, r := range replicas {
		if got := servedSerial(t, r); got != rotatedSerial {
			t.Errorf("%s serves certificate serial %d, want the rotated %d", r.Name, got, rotatedSerial)
		}
		curve := curves[r.Name]
		for _, s := range curve {
			t.Logf("figures: %s at %6s: RSS %6.1f MiB, %4.0f goroutines", r.Name, s.at.Round(time.Second), s.rss/(1<<20), s.goroutines)
		}
		checkFlat(t, r.Name, curve)
	}
}

// churnLabel marks the soak's churned nodes.
const churnLabel = "faults.dsguard.io/churn"

// checkFlat compares the second half of a run with the first half, after a
// warm-up of the first fifth: a leak grows without bound, so its late
// readings stand well above its early ones. Thresholds leave room for the
// heap's natural swing and for a short run's few samples.
func checkFlat(t *testing.T, name string, curve []sample) {
	t.Helper()
	warm := curve[len(curve)/5:]
	if len(warm) < 4 {
		t.Errorf("%s: only %d samples after warm-up; run longer", name, len(warm))
		return
	}
	half := len(warm) / 2
	median := func(ss []sample, f func(sample) float64) float64 {
		vs := make([]float64, len(ss))
		for i, s := range ss {
			vs[i] = f(s)
		}
		slices.Sort(vs)
		return vs[len(vs)/2]
	}
	rss := func(s sample) float64 { return s.rss }
	gor := func(s sample) float64 { return s.goroutines }
	if early, late := median(warm[:half], rss), median(warm[half:], rss); late > early*1.25+8<<20 {
		t.Errorf("%s: RSS grew from %.1f to %.1f MiB", name, early/(1<<20), late/(1<<20))
	}
	if early, late := median(warm[:half], gor), median(warm[half:], gor); late > early+20 {
		t.Errorf("%s: goroutines grew from %.0f to %.0f", name, early, late)
	}
}

// servedSerial returns the serial number of the certificate r serves.
func servedSerial(t *testing.T, r *framework.Replica) int64 {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cluster.Replicas().CA.PEM)
	var serial int64
	waitFor(t, r.Name+" serves a certificate", 10*time.Second, func() (bool, string) {
		conn, err := tls.Dial("tcp", r.Addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		serial = conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
		return true, ""
	})
	return serial
}
