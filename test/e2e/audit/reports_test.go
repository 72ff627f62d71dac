package audit

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// moduleDir finds a module's directory in the Go module cache, where its
// CRDs are (no download from anywhere else).
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	return strings.TrimSpace(string(out))
}

// TestAudit_OpenReports: without the OpenReports CRD dsguard stays quiet;
// once it is installed, every namespace with DaemonSets gets a Report, with
// a DaemonSet that has a gap failing and a healthy one passing.
func TestAudit_OpenReports(t *testing.T) {
	if strings.Contains(cluster.DsguardLog(), "OpenReports") {
		t.Errorf("without the CRD dsguard must not mention OpenReports:\n%s", cluster.DsguardLog())
	}
	create(t, daemonSet("report-healthy", tolerateAll))
	create(t, daemonSet("report-gap", tolerateAll))
	runPods(t, "report-healthy", 4)
	runPods(t, "report-gap", 4, "worker-2")

	crd := filepath.Join(moduleDir(t, "github.com/openreports/reports-api"), "config", "crd", "openreports.io_reports.yaml")
	// The CRD goes when the test ends (its Reports with it): dsguard notices
	// and stops writing them.
	cluster.DeleteOnCleanup(t, "-f", crd)
	if r := cluster.Kubectl(t.Context(), "", "apply", "-f", crd); r.Err != nil {
		t.Fatal(r.Error())
	}
	var report struct {
		Source  string
		Summary struct{ Pass, Fail, Warn, Skip int }
		Results []struct {
			Policy, Rule, Result, Message string
			Resources                     []struct{ Name string }
			Properties                    map[string]string
		}
	}
	// The Report follows the audits: wait until it holds both DaemonSets
	// as the controller's status has them by now.
	var byName map[string]string
	last := "no Report yet"
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		r := cluster.Kubectl(t.Context(), "", "get", "reports.openreports.io", "-n", "audit", "dsguard-daemonset-coverage", "-o", "json")
		if r.ExitCode != 0 {
			last = r.Stderr
			return false
		}
		if err := json.Unmarshal([]byte(r.Stdout), &report); err != nil {
			last = err.Error()
			return false
		}
		byName = map[string]string{}
		for _, res := range report.Results {
			if res.Rule == "status" {
				byName[res.Resources[0].Name] = res.Result + " " + res.Properties["state"]
			}
		}
		last = fmt.Sprintf("source %q, status results %v", report.Source, byName)
		return report.Source == "dsguard" && strings.HasPrefix(byName["report-healthy"], "pass ") &&
			strings.HasPrefix(byName["report-gap"], "fail ")
	}, func() string {
		return "the Report in namespace audit with report-healthy passing and report-gap failing; last: " + last
	})
	t.Logf("Report summary: %+v; status results %v", report.Summary, byName)
	if report.Summary.Fail == 0 || report.Summary.Pass == 0 {
		t.Errorf("summary %+v: want passes and failures", report.Summary)
	}
}
