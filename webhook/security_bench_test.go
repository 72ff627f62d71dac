package webhook

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
)

// worstCaseDS is the CPU-exhaustion object: a required affinity of
// 10,000 terms × 5 hostname values (about 1 MB, within the API server's
// limits).
func worstCaseDS() *appsv1.DaemonSet {
	terms := make([]corev1.NodeSelectorTerm, 10000)
	for i := range terms {
		vals := make([]string, 5)
		for j := range vals {
			vals[j] = fmt.Sprintf("node-%d-%d", i, j)
		}
		terms[i] = corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: vals}}}
	}
	return compliantDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	})
}

func benchHandler(b testing.TB, nodes int) *DaemonSetHandler {
	b.Helper()
	h, _, _ := newTestHandler(b, "")
	snap := coverage.NewNodeSnapshot(testobj.CloudNodes(nodes))
	h.nodes = func() *coverage.NodeSnapshot { return snap }
	return h
}

func reviewRequest(b testing.TB, ds *appsv1.DaemonSet, dryRun bool) admission.Request {
	b.Helper()
	raw, err := json.Marshal(ds)
	if err != nil {
		b.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "bench", Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"},
		Namespace: ds.Namespace, Name: ds.Name, Operation: admissionv1.Create, DryRun: &dryRun,
	}}
	req.Object.Raw = raw
	return req
}

// BenchmarkHandle_WorstCaseAffinity answers the 10,000-term × 5-value
// DaemonSet at 5,000 nodes, decoding included. Target: well under 1 s (it
// is denied by placement-size without a prediction).
func BenchmarkHandle_WorstCaseAffinity(b *testing.B) {
	h := benchHandler(b, 5000)
	req := reviewRequest(b, worstCaseDS(), true)
	b.Logf("review of %d bytes", len(req.Object.Raw))
	b.ResetTimer()
	var worst time.Duration
	for b.Loop() {
		start := time.Now()
		resp := h.Handle(b.Context(), req)
		worst = max(worst, time.Since(start))
		if resp.Allowed {
			b.Fatal("the worst-case object was admitted")
		}
	}
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
	if worst > time.Second {
		b.Errorf("slowest answer %s, target 1s", worst)
	}
}

// floodTarget is a hardened server at 5,000 nodes with the handler behind
// it, and a client for it: what the dry-run flood harness and its test
// send reviews to.
type floodTarget struct {
	url    string
	client *http.Client
}

func newFloodTarget(tb testing.TB, pki testPKI) floodTarget {
	tb.Helper()
	h := benchHandler(tb, 5000)
	srv := NewServer(ServerOptions{Host: "127.0.0.1", TLSOpts: []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pki.server, nil }
	}}}, nil)
	srv.Register(DaemonSetPath, &admission.Webhook{Handler: h})
	errc := make(chan error, 1)
	go func() { errc <- srv.Start(tb.Context()) }()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Addr() == "" {
		select {
		case err := <-errc:
			tb.Fatalf("server stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatal("the server did not listen within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return floodTarget{url: "https://" + srv.Addr() + DaemonSetPath, client: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}, MaxIdleConnsPerHost: 16}}}
}

// dryRunBody is the AdmissionReview of a dry-run CREATE of ds.
func dryRunBody(tb testing.TB, ds *appsv1.DaemonSet) []byte {
	tb.Helper()
	return reviewBody(tb, reviewRequest(tb, ds, true))
}

// send posts a review and returns its answer and how long it took; an
// answer that is not a review (a refusal as busy) is an error.
func (f floodTarget) send(data []byte) (*admissionv1.AdmissionResponse, time.Duration, error) {
	start := time.Now()
	resp, err := f.client.Post(f.url, "application/json", bytes.NewReader(data))
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, 0, err
	}
	if out.Response == nil {
		return nil, 0, fmt.Errorf("a review without a response")
	}
	return out.Response, time.Since(start), nil
}

// floodCounts are the worst-case reviews of a flood, by how they ended.
type floodCounts struct {
	// denied were answered with a refusal, admitted with an admission
	// (which must never happen), refused were turned away as busy.
	denied, admitted, refused atomic.Int64
}

// flood starts clients that send the worst-case review in a loop until the
// returned function is called (once or more), which waits for them to stop.
func (f floodTarget) flood(clients int, worst []byte) (*floodCounts, func()) {
	counts := &floodCounts{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch resp, _, err := f.send(worst); {
				case err != nil:
					counts.refused.Add(1)
				case resp.Allowed:
					counts.admitted.Add(1)
				default:
					counts.denied.Add(1)
				}
			}
		}()
	}
	var once sync.Once
	return counts, func() { once.Do(func() { close(stop) }); wg.Wait() }
}

// BenchmarkDryRunFlood_CompliantLatency is the harness for dry-run floods:
// 8 clients send the worst-case object in a loop (as --dry-run=server lets
// anyone do for free) to the hardened server at 5,000 nodes, while one
// client sends compliant DaemonSets one after the other. It reports the
// compliant reviews' p50 and p99; the target is p99 < 100 ms.
// TestDryRunFlood_CompliantReviewsAreAdmitted checks what the answers are.
func BenchmarkDryRunFlood_CompliantLatency(b *testing.B) {
	const floodDuration = 10 * time.Second
	f := newFloodTarget(b, newTestPKI(&testing.T{}))
	worst, ok := dryRunBody(b, worstCaseDS()), dryRunBody(b, compliantDS())
	counts, stop := f.flood(8, worst)
	// Measure only once the flood is under way, and for long enough that
	// the flood keeps the server busy the whole time, not only for the
	// first few compliant reviews.
	for counts.denied.Load()+counts.admitted.Load()+counts.refused.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	var lat []time.Duration
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N || time.Since(start) < floodDuration; i++ {
		resp, d, err := f.send(ok)
		if err != nil {
			b.Fatal(err)
		}
		if !resp.Allowed {
			b.Fatalf("a compliant review was refused: %v", resp.Result)
		}
		lat = append(lat, d)
	}
	b.StopTimer()
	stop()
	if n := counts.admitted.Load(); n > 0 {
		b.Errorf("%d worst-case reviews admitted", n)
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	b.ReportMetric(float64(p(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
	b.Logf("%d compliant reviews in %s during %d worst-case reviews answered and %d refused as busy: p50 %s, p99 %s",
		len(lat), time.Since(start).Round(time.Millisecond), counts.denied.Load(), counts.refused.Load(), p(0.5), p(0.99))
	if len(lat) >= 100 && p(0.99) > 100*time.Millisecond {
		b.Errorf("p99 of compliant reviews %s during the flood, target 100ms", p(0.99))
	}
}
