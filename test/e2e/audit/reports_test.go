package audit

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
// once it is installed, every namespace with DaemonSets gets a Report.
func TestAudit_OpenReports(t *testing.T) {
	if strings.Contains(cluster.DsguardLog(), "OpenReports") {
		t.Errorf("without the CRD dsguard must not mention OpenReports:\n%s", cluster.DsguardLog())
	}
	crd := filepath.Join(moduleDir(t, "github.com/openreports/reports-api"), "config", "crd", "openreports.io_reports.yaml")
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
	waitFor(t, "the OpenReports Report in namespace audit", func() (bool, error) {
		r := cluster.Kubectl(t.Context(), "", "get", "reports.openreports.io", "-n", "audit", "dsguard-daemonset-coverage", "-o", "json")
		if r.ExitCode != 0 {
			return false, nil
		}
		return true, json.Unmarshal([]byte(r.Stdout), &report)
	})
	t.Logf("Report summary: %+v", report.Summary)
	byName := map[string]string{}
	for _, res := range report.Results {
		if res.Rule == "status" {
			byName[res.Resources[0].Name] = res.Result + " " + res.Properties["state"]
		}
	}
	if report.Source != "dsguard" || byName["steady"] == "" || byName["gappy"] == "" || byName["picky"] == "" {
		t.Fatalf("report misses DaemonSets: %+v", report)
	}
	// picky skips worker-3 since the Misscheduled scenario tainted it.
	if !strings.HasPrefix(byName["picky"], "fail ") {
		t.Errorf("picky: %q, want fail", byName["picky"])
	}
	if report.Summary.Fail == 0 || report.Summary.Pass == 0 {
		t.Errorf("summary %+v: want passes and failures", report.Summary)
	}
}
