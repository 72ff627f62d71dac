package security

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestStalledBodyFlood_WithoutClientAuth runs a second dsguard as the
// chart's default install does, without client authentication, for
// kube-flannel (a fail-open namespace, failurePolicy Ignore), knowing only
// the API server's address (--api-server-addresses, which the chart looks
// up). Three Pods, playing from 127.0.0.3-5, each keep two connections that
// send almost the largest body dsguard reads and then stall, reconnecting
// when dsguard cuts them: together they would hold the whole large-body
// budget. Through the real API server, 1.2 MiB reviews of a non-compliant
// DaemonSet must still be judged by that dsguard (its warned decisions
// count them), none of its refusals may be the API server's, the flood's
// are counted as its own, and a review forged from a Pod's address after
// the API server was seen counts as unverified, not as a decision, and
// moves no request series.
func TestStalledBodyFlood_WithoutClientAuth(t *testing.T) {
	port, health, metricsPort := freePort(t), freePort(t), freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	const vwc = "dsguard-noauth"
	noAuthDsguard{name: vwc, namespace: "kube-flannel", failurePolicy: "Ignore", timeout: 10, port: port, health: health,
		flags: []string{"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(metricsPort), "--metrics-secure=false",
			"--fail-open-namespaces=kube-flannel"}}.start(t)
	scrapeIt := func() []byte {
		t.Helper()
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	sum := func(b []byte, name string, labels ...string) float64 {
		v, _ := framework.SumMetric(b, name, labels...)
		return v
	}
	// About 1.2 MiB: its review needs about 1 MiB of the budget, which the
	// flood, if it could, would leave nobody.
	big := bloated(example(t, "node-exporter.yaml", "noauth-bloated", "kube-flannel"))
	for i := range 90 {
		c := &big.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("MORE_PADDING_%d", i), Value: strings.Repeat("x", 10<<10)})
	}
	bad := toYAML(t, big)
	judged := func() float64 {
		return sum(scrapeIt(), "dsguard_admission_decisions_total", `result="warned"`)
	}
	// Until the API server's caBundle holds this dsguard's CA, its calls
	// fail and are ignored: wait until one is judged.
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		before := judged()
		kubectl(t, bad, "create", "--dry-run=server", "-f", "-")
		return judged() > before
	}, func() string { return "the API server's review judged by the dsguard without client authentication" })

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var held atomic.Int64
	for _, pod := range []string{"127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					stalledBody(ctx, pod, addr, &held)
				}
			})
		}
	}
	framework.Eventually(t, 20*time.Second, 100*time.Millisecond, func() bool {
		return sum(scrapeIt(), "dsguard_webhook_refusals_total", `reason="body-budget"`, `caller="unknown"`) > 0
	}, func() string { return fmt.Sprintf("the flood to fill its share (%d stalled bodies sent)", held.Load()) })

	before := scrapeIt()
	const reviews = 5
	for range reviews {
		if r := kubectl(t, bad, "create", "--dry-run=server", "-f", "-"); r.ExitCode != 0 {
			t.Errorf("a fail-open namespace refused the create: exit %d\n%s", r.ExitCode, r.Stderr)
		}
	}
	// A review forged from a Pod's address, after the API server was seen.
	forged := heavyReview(t)
	c := fromSource(t, "127.0.0.3")
	resp, err := c.Post("https://"+addr+"/validate-daemonset", "application/json", strings.NewReader(string(forged)))
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	c.CloseIdleConnections()
	cancel()
	wg.Wait()

	after := scrapeIt()
	delta := func(name string, labels ...string) float64 {
		return sum(after, name, labels...) - sum(before, name, labels...)
	}
	if n := delta("dsguard_admission_decisions_total", `result="warned"`); n != reviews {
		t.Errorf("of %d API server reviews under the flood, %v were judged (warned); the rest went unjudged", reviews, n)
	}
	if n := delta("dsguard_webhook_refusals_total", `caller="api-server-address"`); n != 0 {
		t.Errorf("%v of the API server's requests were refused under the flood", n)
	}
	if n := delta("dsguard_webhook_refusals_total", `caller="unknown"`); n == 0 {
		t.Error("no refusal of the flood was counted while the reviews were judged")
	}
	if n := delta("dsguard_admission_decisions_total", `result="unverified"`); n != 1 {
		t.Errorf("the forged review: decisions{result=\"unverified\"} moved by %v, want 1", n)
	}
	// Nor does it move controller-runtime's request series (latency,
	// codes): only the API server's reviews reached them.
	for _, series := range []string{"controller_runtime_webhook_requests_total", "controller_runtime_webhook_latency_seconds_count"} {
		if n := delta(series, `webhook="/validate-daemonset"`); n != reviews {
			t.Errorf("%s{webhook=\"/validate-daemonset\"} moved by %v, want %d: the API server's reviews and not the forged one", series, n, reviews)
		}
	}
	t.Logf("flood: %d stalled bodies sent; refusals of the flood %v", held.Load(), delta("dsguard_webhook_refusals_total", `caller="unknown"`))
}

// stalledBody connects from source, announces a body just under the
// largest dsguard reads, sends all of it but one byte at once, and waits
// until dsguard closes the connection or ctx ends.
func stalledBody(ctx context.Context, source, addr string, sent *atomic.Int64) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}},
		Config: &tls.Config{InsecureSkipVerify: true}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		time.Sleep(100 * time.Millisecond)
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	const size = 7<<20 - 1
	if _, err := fmt.Fprintf(conn, "POST /validate-daemonset HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, size); err != nil {
		return
	}
	go func() { _, _ = conn.Write([]byte(strings.Repeat(" ", size-1))) }()
	sent.Add(1)
	_, _ = io.Copy(io.Discard, conn)
}

// fromSource is an HTTPS client whose connections leave from source.
func fromSource(t *testing.T, source string) *http.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a Pod forging a review does not check the server
}

// freePort is a free local port, or the test ends.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
