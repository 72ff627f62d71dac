package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// dashboardMetric names the series a dashboard query reads; Prometheus'
// own `up` is not dsguard's.
var dashboardMetric = regexp.MustCompile(`\b(?:dsguard|controller_runtime)_[a-z0-9_]+\b`)

// TestDashboard_QueriesReadWhatDsguardExports scrapes the suite's running
// dsguard after a DaemonSet review, a denial, an audit and a Node label
// change, and finds in
// the scrape every series the chart's Grafana dashboard queries (counters
// and histograms as their samples, e.g. _bucket). The families that appear
// only after an event this suite does not cause (a refused request, an
// exemption, a certificate dsguard manages) are named; the rest must be
// there. A person's Node label change makes the nodes webhook's series.
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

	// Exported only once something happens that this suite does not do.
	eventDriven := []string{
		"dsguard_webhook_refusals_total",               // a request refused as busy
		"dsguard_exemptions_active",                    // an exemption in the policy
		"dsguard_certificate_expiry_timestamp_seconds", // a certificate dsguard manages (selfManaged)
	}
	var missing []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		exposition := scrape(t)
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
	t.Logf("figures: %d dashboard queries read %d dsguard series, %d of them found in a live scrape, %d exported only after events this suite does not cause",
		len(exprs), len(queried), len(queried)-len(missing)-countIn(queried, eventDriven), countIn(queried, eventDriven))
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
