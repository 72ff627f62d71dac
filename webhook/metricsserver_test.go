package webhook

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestMetricsServer_CapEvictsIdleFloods fills the metrics port with
// connections that never start a TLS handshake: the port holds at most its
// cap, the flood evicts itself, and a scrape still gets the metrics.
func TestMetricsServer_CapEvictsIdleFloods(t *testing.T) {
	pki := newTestPKI(t)
	var evicted atomic.Int64
	const limit, flood = 4, 40
	srv := NewMetricsServer(MetricsServerOptions{
		Addr: "127.0.0.1:0", Secure: true, MaxConnections: limit, OnEvict: func() { evicted.Add(1) },
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pki.server, nil }
		}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "dsguard_up 1\n") }),
	})
	errc := make(chan error, 1)
	go func() { errc <- srv.Start(t.Context()) }()
	waitUntil(t, 10*time.Second, "the metrics server to listen", func() bool {
		select {
		case err := <-errc:
			t.Fatalf("metrics server stopped: %v", err)
		default:
		}
		return srv.Addr() != ""
	})

	for range flood {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	waitUntil(t, 10*time.Second, "the flood to evict itself down to the cap", func() bool {
		return evicted.Load() >= flood-limit
	})
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatalf("scrape at the cap: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "dsguard_up 1") {
		t.Fatalf("scrape at the cap: %d %q", resp.StatusCode, body)
	}
	if got := evicted.Load(); got < flood+1-limit {
		t.Errorf("evicted %d connections, want at least %d: the port held more than %d", got, flood+1-limit, limit)
	}
}

// waitUntil polls cond every 10 ms and fails the test, saying what it
// waited for, when cond is not true within bound.
func waitUntil(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", bound, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
