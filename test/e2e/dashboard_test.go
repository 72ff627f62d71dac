package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/test/e2e/framework"
)

// dashboardMetric names the series a dashboard query reads; Prometheus'
// own `up` is not dsguard's.
var dashboardMetric = regexp.MustCompile(`\b(?:dsguard|controller_runtime)_[a-z0-9_]+\b`)

// TestDashboard_QueriesReadWhatDsguardExports scrapes the suite's running
// dsguard after a DaemonSet review, a denial, an audit of a DaemonSet with
// an exemption, a Node label change and a request cut off for its pace, and
// finds in the scrape every series the chart's Grafana dashboard queries
// (counters and histograms as their samples, e.g. _bucket); only the
// certificate expiry, exported when dsguard manages its certificate
// (selfManaged), is left out. Then it holds every label each query groups
// by (by, without), matches on or selects on against the labels those
// series carry in the same scrape: a grouping label a series lacks gives
// one empty group, and a per-DaemonSet series that lost its own namespace
// would be grouped by the release's namespace that the scrape adds.
func TestDashboard_QueriesReadWhatDsguardExports(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(cluster.Root, "charts", "dsguard", "dashboards", "dsguard.json"))
	if err != nil {
		t.Fatal(err)
	}
	exprs, err := framework.DashboardQueries(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) < 10 {
		t.Fatalf("the dashboard holds %d queries, want its panels' queries", len(exprs))
	}
	var queried []string
	for _, e := range exprs {
		for _, m := range dashboardMetric.FindAllString(e, -1) {
			if !slices.Contains(queried, m) {
				queried = append(queried, m)
			}
		}
	}

	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "dashboard-agent")
	r := kubectl(t, renamed(t, "node-exporter-tolerations.yaml", "node-exporter", "dashboard-agent"), "apply", "-f", "-")
	if r.ExitCode != 0 {
		t.Fatalf("creating the agent: %s", r.Stderr)
	}
	// An exemption in force makes dsguard_exemptions_active{rule,namespace}.
	if r := kubectl(t, "", "annotate", "daemonset", "-n", "monitoring", "dashboard-agent",
		policy.ExemptionAnnotationPrefix+"image-pinned=the dashboard's exemptions panel"); r.ExitCode != 0 {
		t.Fatalf("exempting the agent: %s", r.Stderr)
	}
	kubectl(t, manifest(t, "node-exporter.yaml"), "apply", "--dry-run=server", "-f", "-")
	// A person's label change on a Node goes through the nodes webhook.
	node := strings.TrimPrefix(strings.Fields(kubectl(t, "", "get", "nodes", "-o", "name").Stdout)[0], "node/")
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		cluster.Kubectl(ctx, "", "label", "node", node, "dsguard-dashboard-")
	})
	if r := kubectl(t, "", "label", "node", node, "dsguard-dashboard=probe", "--overwrite"); r.ExitCode != 0 {
		t.Fatalf("labelling node %s: %s", node, r.Stderr)
	}
	stallBody(t)

	// Exported only once something happens that this suite does not do.
	eventDriven := []string{
		"dsguard_certificate_expiry_timestamp_seconds", // a certificate dsguard manages (selfManaged)
	}
	var missing []string
	var exposition string
	deadline := time.Now().Add(60 * time.Second)
	for {
		exposition = scrape(t)
		missing = missing[:0]
		for _, m := range queried {
			if !slices.Contains(eventDriven, m) && !hasSample(exposition, m) {
				missing = append(missing, m)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(missing) > 0 {
		t.Errorf("the dashboard queries series the running dsguard does not export: %v", missing)
	}

	exported, err := framework.ExportedLabels([]byte(exposition))
	if err != nil {
		t.Fatalf("reading the scrape: %v", err)
	}
	// What the chart's ServiceMonitor adds to every series it scrapes.
	series := framework.Series{Exported: exported, Target: []string{"job", "namespace", "instance", "pod", "service", "endpoint", "container"}}
	checked := 0
	for _, e := range exprs {
		n, problems, err := framework.CheckQueryLabels(e, series)
		if err != nil {
			t.Errorf("the dashboard's query cannot be read for its labels: %v", err)
			continue
		}
		checked += n
		for _, p := range problems {
			t.Errorf("the dashboard's query %s\n  %s", e, p)
		}
	}
	if checked < len(exprs) {
		t.Errorf("%d labels checked in %d queries: the reader no longer sees the queries' labels", checked, len(exprs))
	}
	t.Logf("figures: %d dashboard queries read %d dsguard series, %d of them found in a live scrape, %d exported only after events this suite does not cause; %d labels they group, match or select by held against the scrape",
		len(exprs), len(queried), len(queried)-len(missing)-countIn(queried, eventDriven), countIn(queried, eventDriven), checked)
}

// stallBody announces a review to dsguard's webhook port without a client
// certificate and sends none of its body, until dsguard cuts it off for its
// pace: dsguard_webhook_refusals_total{reason="slow-body",caller="unauthenticated"}.
func stallBody(t *testing.T) {
	t.Helper()
	u, err := url.Parse(cluster.WebhookURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a client that stalls has no use for the server's identity
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		t.Fatalf("connecting to dsguard's webhook port: %v", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if _, err := fmt.Fprintf(conn, "POST /validate-daemonset HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Host, 1<<20); err != nil {
		t.Fatalf("announcing the review: %v", err)
	}
	answer, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(answer), "HTTP/1.1 408") {
		t.Fatalf("dsguard answered a stalled body with %q, want 408 Request Timeout", answer)
	}
}

func scrape(t *testing.T) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, metricsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hasSample reports whether the exposition holds a sample of name.
func hasSample(exposition, name string) bool {
	for _, l := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			return true
		}
	}
	return false
}

func countIn(names, of []string) int {
	n := 0
	for _, m := range names {
		if slices.Contains(of, m) {
			n++
		}
	}
	return n
}
