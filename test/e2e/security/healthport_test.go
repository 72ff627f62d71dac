package security

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// attackerAddr is the source address of the connections held on the health
// port: another Pod, apart from the kubelet (the test's own probes come from
// 127.0.0.1).
var attackerAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}

// healthPortCap is dsguard serve's default --health-probe-max-connections.
const healthPortCap = 16

// TestHealthPortHeaderFlood_MemoryStaysBoundedAndProbesAnswer holds 1,000
// connections on dsguard's health port, each sending header lines of 1 KB
// every 20 ms (a request whose headers never end, as slowloris sends them),
// reconnecting whenever dsguard closes it, while the test probes /readyz
// with the kubelet's default timeout (1 s) and creates DaemonSets through the
// API server. Every probe and every create must succeed, and dsguard's
// resident memory must stay under the chart's limit (the attack stops as
// soon as it reaches it).
func TestHealthPortHeaderFlood_MemoryStaysBoundedAndProbesAnswer(t *testing.T) {
	const attackers = 1000
	addr := cluster.HealthAddr()
	rssBefore := residentBytes(t, cluster.DsguardPID())
	heapBefore := heapInuse(t)
	var opened, header atomic.Int64
	cut, stop := attack(t.Context(), attackers, 50*time.Millisecond, func(ctx context.Context) bool {
		return endlessHeaders(ctx, addr, &opened, &header)
	})
	defer stop()

	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var maxRSS int64
	probes, creates := 0, 0
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if rss := residentBytes(t, cluster.DsguardPID()); rss > maxRSS {
			maxRSS = rss
		}
		if maxRSS >= chartMemoryLimit {
			break
		}
		if err := readyz(probe, addr); err != nil {
			t.Errorf("probe %d during the attack (%d connections opened): %v", i, opened.Load(), err)
		}
		probes++
		if i%3 == 0 {
			ds := compliant(t, fmt.Sprintf("health-flood-%d", i), "team-a")
			if _, err := kube.AppsV1().DaemonSets("team-a").Create(t.Context(), ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("create %d during the attack: %v", i, err)
			}
			creates++
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	rssAfter := residentBytes(t, cluster.DsguardPID())
	t.Logf("%d attackers opened %d connections and sent %d MiB of headers, %d cut by dsguard; %d probes, %d creates; "+
		"dsguard's RSS %d MiB before, peak %d MiB, %d MiB after; Go heap in use %d MiB before, %d MiB after",
		attackers, opened.Load(), header.Load()>>20, cut.Load(), probes, creates,
		rssBefore>>20, maxRSS>>20, rssAfter>>20, int64(heapBefore)>>20, int64(heapInuse(t))>>20)
	if opened.Load() < attackers {
		t.Errorf("only %d attacking connections opened, want at least %d", opened.Load(), attackers)
	}
	if maxRSS >= chartMemoryLimit {
		t.Errorf("dsguard's resident memory reached %d MiB (%d MiB before the attack), the chart's limit is %d MiB",
			maxRSS>>20, rssBefore>>20, chartMemoryLimit>>20)
	}
	if err := readyz(probe, addr); err != nil {
		t.Errorf("probe after the attack: %v", err)
	}
}

// TestHealthPortIdleConnections_HeldAtTheCap opens 1,000 kept-alive
// connections to the health port from one source, each sending one whole
// /healthz request, and then leaves them idle: dsguard must not hold more
// than its cap of them, and none once they have been idle for a few seconds
// (the kubelet never reuses a probe connection).
func TestHealthPortIdleConnections_HeldAtTheCap(t *testing.T) {
	const attackers = 1000
	addr := cluster.HealthAddr()
	d := &net.Dialer{LocalAddr: attackerAddr, Timeout: 5 * time.Second}
	conns := make([]net.Conn, 0, attackers)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	rssBefore := residentBytes(t, cluster.DsguardPID())
	answered := 0
	for range attackers {
		c, err := d.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answered++
		}
	}
	rssHeld := residentBytes(t, cluster.DsguardPID())
	heldNow := stillOpen(conns)
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if err := readyz(probe, addr); err != nil {
		t.Errorf("probe with %d idle connections held: %v", heldNow, err)
	}
	time.Sleep(7 * time.Second)
	heldLater := stillOpen(conns)
	t.Logf("%d connections opened, %d answered; dsguard held %d of them at once and %d after 7 s idle; RSS %d MiB before, %d MiB while held",
		len(conns), answered, heldNow, heldLater, rssBefore>>20, rssHeld>>20)
	if heldNow > healthPortCap {
		t.Errorf("dsguard held %d idle connections to the health port, want at most its cap of %d", heldNow, healthPortCap)
	}
	if heldLater > 0 {
		t.Errorf("dsguard still held %d connections idle for 7 s, want none", heldLater)
	}
}

// endlessHeaders opens one connection to the health port and sends a
// request whose headers never end until ctx ends or dsguard closes the
// connection (true).
func endlessHeaders(ctx context.Context, addr string, opened, sent *atomic.Int64) bool {
	d := &net.Dialer{LocalAddr: attackerAddr, Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	opened.Add(1)
	if _, err := fmt.Fprintf(conn, "GET /readyz HTTP/1.1\r\nHost: %s\r\n", addr); err != nil {
		return true
	}
	line := []byte("X-Padding: " + strings.Repeat("a", 1000) + "\r\n")
	for {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := conn.Write(line)
		sent.Add(int64(n))
		if err != nil {
			return true
		}
	}
}

// stillOpen counts the connections dsguard has not closed: a read that
// times out (rather than ending) means the other end still holds it.
func stillOpen(conns []net.Conn) int {
	n := 0
	var one [1]byte
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, err := c.Read(one[:])
		var ne net.Error
		if err != nil && errors.As(err, &ne) && ne.Timeout() {
			n++
		}
	}
	return n
}

// readyz asks dsguard's /readyz as the kubelet does.
func readyz(c *http.Client, addr string) error {
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %d: %s", resp.StatusCode, body)
	}
	return nil
}

// heapInuse is dsguard's Go heap in use, from its metrics.
func heapInuse(t *testing.T) float64 {
	t.Helper()
	v, err := framework.SumMetric(scrape(t), "go_memstats_heap_inuse_bytes")
	if err != nil {
		t.Error(err)
	}
	return v
}
