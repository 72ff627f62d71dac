package security

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestFailOpenProbe_JudgedUnderAFlood plays a Pod on dsguard's webhook port
// that tries to make dsguard answer "busy", so that the API server applies
// the fail-open entry's failurePolicy Ignore and admits a DaemonSet
// unjudged: six connections announce a chunked body and send nothing (once
// enough to fill the large-body budget), and 256 more send reviews of
// heavy placements and wait for the heavy lane (once enough to fill the
// connection cap with connections never evicted), each reconnecting as
// soon as dsguard drops it. Meanwhile, through the real API server, a
// non-compliant DaemonSet of 300 KiB in kube-flannel (a fail-open
// namespace) must still be judged: admitted with dsguard's warning, not
// unjudged; a compliant one passes without it; every refusal is counted,
// none of them the API server's; and a forged review sent and abandoned
// leaves the error series alone.
func TestFailOpenProbe_JudgedUnderAFlood(t *testing.T) {
	u, err := url.Parse(cluster.WebhookURL)
	if err != nil {
		t.Fatal(err)
	}
	before := scrape(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var silentOpened, waitingSent atomic.Int64
	for range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				silentChunked(ctx, u.Host, &silentOpened)
			}
		})
	}
	heavy := heavyReview(t)
	for i := range 256 {
		wg.Go(func() {
			// Spread the first connections over a second.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(i) * 4 * time.Millisecond):
			}
			for ctx.Err() == nil {
				sendAndWait(ctx, u.Host, heavy, &waitingSent)
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
	// Let the flood build up: the silent connections open, the waiting
	// ones queue.
	deadline := time.Now().Add(20 * time.Second)
	for silentOpened.Load() < 6 || waitingSent.Load() < 256 {
		if time.Now().After(deadline) {
			t.Fatalf("the flood did not build up: %d silent connections, %d heavy reviews sent", silentOpened.Load(), waitingSent.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// create, not apply: apply would copy the 300 KiB object into its
	// last-applied annotation, which the API server caps at 256 KiB.
	bad := bloated(example(t, "node-exporter.yaml", "flannel-bloated", "kube-flannel"))
	r := kubectl(t, toYAML(t, bad), "create", "--dry-run=server", "-f", "-")
	if r.ExitCode != 0 || !strings.Contains(strings.Join(warnings(r), "\n"), "control-plane-toleration: no toleration") {
		t.Errorf("a non-compliant 300 KiB DaemonSet in kube-flannel under the flood: want admitted with dsguard's control-plane-toleration warning (judged), got exit %d:\n%s",
			r.ExitCode, r.Stderr)
	}
	good := bloated(compliant(t, "flannel-bloated-ok", "kube-flannel"))
	r = kubectl(t, toYAML(t, good), "create", "--dry-run=server", "-f", "-")
	if r.ExitCode != 0 || strings.Contains(r.Stderr, "could not judge") || strings.Contains(r.Stderr, "control-plane-toleration") {
		t.Errorf("a compliant 300 KiB DaemonSet in kube-flannel under the flood: want admitted without a dsguard warning, got exit %d:\n%s",
			r.ExitCode, r.Stderr)
	}
	enforced := bloated(compliant(t, "bloated-ok", "team-a"))
	if _, err := kube.AppsV1().DaemonSets("team-a").Create(t.Context(), enforced, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("a compliant 300 KiB DaemonSet in team-a (fail-closed entry) under the flood: %v", err)
	}

	cancel()
	wg.Wait()
	// A forged review, sent and abandoned before its answer (after the
	// flood, whose connections would crowd out its handshake).
	abandon(t, u.Host, heavy)

	after := scrape(t)
	delta := func(name string, labels ...string) float64 {
		a, _ := framework.SumMetric(after, name, labels...)
		b, _ := framework.SumMetric(before, name, labels...)
		return a - b
	}
	// A silent connection is cut either for its pace or, when the waiting
	// flood fills the connection cap first, evicted as the one stuck
	// longest mid-request: both free what it held.
	slow := delta("dsguard_webhook_refusals_total", `reason="slow-body"`, `caller="unauthenticated"`)
	evicted := delta("dsguard_webhook_refusals_total", `reason="connection-evicted"`, `caller="unauthenticated"`)
	if slow+evicted < 6 {
		t.Errorf("silent connections cut: %v for their pace and %v evicted, want at least the 6 silent connections", slow, evicted)
	}
	if n := delta("dsguard_webhook_refusals_total", `caller="unauthenticated"`); n == 0 {
		t.Error("no refusal of the flood was counted")
	}
	if n := delta("dsguard_webhook_refusals_total", `caller="api-server"`); n != 0 {
		t.Errorf("%v of the API server's requests or connections were refused under the flood", n)
	}
	if n := delta("dsguard_admission_decisions_total", `result="error"`); n != 0 {
		t.Errorf("the flood and the abandoned review moved dsguard_admission_decisions_total{result=\"error\"} by %v", n)
	}
	t.Logf("flood: %d silent chunked connections, %d heavy reviews sent; refusals by the flood: %v (%v slow bodies, %v connections evicted)",
		silentOpened.Load(), waitingSent.Load(), delta("dsguard_webhook_refusals_total", `caller="unauthenticated"`), slow, evicted)
}

// scrape reads dsguard's metrics.
func scrape(t *testing.T) []byte {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// dialWebhook opens a TLS connection to the webhook port without a client
// certificate, as a Pod would.
func dialWebhook(ctx context.Context, addr string) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: &tls.Config{InsecureSkipVerify: true}}
	return d.DialContext(ctx, "tcp", addr)
}

// silentChunked announces a chunked review body and sends nothing until
// dsguard closes the connection or ctx ends.
func silentChunked(ctx context.Context, addr string, opened *atomic.Int64) {
	conn, err := dialWebhook(ctx, addr)
	if err != nil {
		time.Sleep(100 * time.Millisecond)
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if _, err := fmt.Fprintf(conn, "POST /validate-daemonset HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", addr); err != nil {
		return
	}
	opened.Add(1)
	_, _ = io.Copy(io.Discard, conn)
}

// sendAndWait sends a whole review and waits for its answer, or for dsguard
// to drop the connection.
func sendAndWait(ctx context.Context, addr string, review []byte, sent *atomic.Int64) {
	conn, err := dialWebhook(ctx, addr)
	if err != nil {
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if _, err := fmt.Fprintf(conn, "POST /validate-daemonset HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		addr, len(review), review); err != nil {
		return
	}
	sent.Add(1)
	_, _ = io.Copy(io.Discard, conn)
}

// abandon sends a whole review and closes the connection at once.
func abandon(t *testing.T, addr string, review []byte) {
	t.Helper()
	conn, err := dialWebhook(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /validate-daemonset HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		addr, len(review), review)
	conn.Close()
	// Give dsguard the time to notice.
	time.Sleep(500 * time.Millisecond)
}

// heavyReview is a review of a DaemonSet whose placement names 300 nodes:
// its prediction takes the heavy lane.
func heavyReview(t *testing.T) []byte {
	t.Helper()
	ds := example(t, "node-exporter.yaml", "heavy", "team-b")
	terms := make([]corev1.NodeSelectorTerm, 300)
	for i := range terms {
		terms[i] = corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{fmt.Sprintf("worker-%d", i)}}}}
	}
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	raw, err := json.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "forged-1",
			Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"},
			Namespace: "team-b", Name: "heavy", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(review)
}

// bloated pads ds to about 300 KiB with environment variables, so that its
// review is over the 256 KiB at which reviews take the heavy lane.
func bloated(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	c := &ds.Spec.Template.Spec.Containers[0]
	for i := range 30 {
		c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("PADDING_%d", i), Value: strings.Repeat("x", 10<<10)})
	}
	return ds
}
