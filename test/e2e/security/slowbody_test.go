package security

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// chartMemoryLimit is the memory limit of the chart's default resources.
const chartMemoryLimit = 256 << 20

// TestSlowBodyAttack_MemoryStaysBoundedAndCompliantRequestsSucceed opens
// 1,000 connections to dsguard's webhook port that send their headers and
// then a byte of body now and then, reconnecting whenever dsguard closes
// them, while DaemonSets are created through the API server. Every create
// must get dsguard's verdict (the webhook entry fails closed, so a review
// dsguard does not answer in time would fail the create), and dsguard's
// resident memory must stay under the chart's limit.
func TestSlowBodyAttack_MemoryStaysBoundedAndCompliantRequestsSucceed(t *testing.T) {
	const attackers = 1000
	u, err := url.Parse(cluster.WebhookURL)
	if err != nil {
		t.Fatal(err)
	}
	var opened atomic.Int64
	closedByDsguard, stop := attack(t.Context(), attackers, 100*time.Millisecond, func(ctx context.Context) bool {
		return slowBody(ctx, u.Host, &opened)
	})
	defer stop()

	var maxRSS int64
	sample := func() {
		if rss := residentBytes(t, cluster.DsguardPID()); rss > maxRSS {
			maxRSS = rss
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	creates, worst := 0, time.Duration(0)
	for i := 0; time.Now().Before(deadline); i++ {
		sample()
		ds := compliant(t, fmt.Sprintf("under-attack-%d", i), "team-a")
		start := time.Now()
		_, err := kube.AppsV1().DaemonSets("team-a").Create(t.Context(), ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("create %d during the attack (%d connections opened so far): %v", i, opened.Load(), err)
		}
		worst = max(worst, time.Since(start))
		creates++
		time.Sleep(200 * time.Millisecond)
	}
	sample()
	t.Logf("%d attackers opened %d connections, %d closed by dsguard; %d creates succeeded (slowest %s); dsguard's peak RSS %d MiB",
		attackers, opened.Load(), closedByDsguard.Load(), creates, worst.Round(time.Millisecond), maxRSS>>20)
	if opened.Load() < attackers {
		t.Errorf("only %d attacking connections opened, want at least %d", opened.Load(), attackers)
	}
	if maxRSS >= chartMemoryLimit {
		t.Errorf("dsguard's resident memory reached %d MiB, the chart's limit is %d MiB", maxRSS>>20, chartMemoryLimit>>20)
	}
}

// attack runs attackers goroutines, each calling one (a connection that
// returns true when dsguard closed it) again pause after it returns, the
// first ones spread over a second, until stop is called; cut counts the
// connections dsguard closed.
func attack(ctx context.Context, attackers int, pause time.Duration, one func(context.Context) bool) (cut *atomic.Int64, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	cut = &atomic.Int64{}
	var wg sync.WaitGroup
	for i := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(i) * time.Millisecond):
			}
			for ctx.Err() == nil {
				if one(ctx) {
					cut.Add(1)
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		}()
	}
	return cut, func() { cancel(); wg.Wait() }
}

// slowBody opens one connection, sends the headers of a review with a large
// body, then one byte per second until ctx ends or dsguard closes the
// connection (true).
func slowBody(ctx context.Context, addr string, opened *atomic.Int64) bool {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: &tls.Config{InsecureSkipVerify: true}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	opened.Add(1)
	if _, err := fmt.Fprintf(conn, "POST /validate-daemonset HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: 1000000\r\n\r\n{", addr); err != nil {
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
		if _, err := conn.Write([]byte(" ")); err != nil {
			return true
		}
	}
}

// residentBytes reads a process's resident set size from /proc.
func residentBytes(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading dsguard's memory: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}
