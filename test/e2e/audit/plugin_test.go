package audit

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestKubectlPlugin_AuditAllNamespaces installs the binary as kubectl-dsguard
// on PATH, as krew does, and runs `kubectl dsguard audit -A` through the real
// kubectl's plugin mechanism, with kubectl-style flags passed through.
func TestKubectlPlugin_AuditAllNamespaces(t *testing.T) {
	agent := daemonSet("plugin-agent", tolerateAll)
	agent.Labels = map[string]string{"app": "plugin-agent"}
	create(t, agent)
	waitStatus(t, "plugin-agent", func(d *appsv1.DaemonSet) bool { return d.Status.DesiredNumberScheduled == 4 })

	dir := t.TempDir()
	if err := os.Symlink(cluster.Dsguard, filepath.Join(dir, "kubectl-dsguard")); err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(cluster.Tools, "kubectl")
	env := []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}
	run := func(args ...string) framework.Result {
		t.Helper()
		r := framework.Run(t.Context(), cluster.Root, "", env, kubectl, args...)
		t.Logf("$ kubectl %s\n%s%s(exit %d)", strings.Join(args, " "), r.Stdout, r.Stderr, r.ExitCode)
		return r
	}

	if r := run("plugin", "list"); !strings.Contains(r.Stdout, filepath.Join(dir, "kubectl-dsguard")) {
		t.Errorf("kubectl plugin list does not find kubectl-dsguard")
	}
	r := run("dsguard", "audit", "-A", "--kubeconfig", cluster.Kubeconfig)
	if r.ExitCode != 0 {
		t.Fatalf("kubectl dsguard audit -A: exit %d", r.ExitCode)
	}
	// kubectl's table printer: upper-case headers, columns three spaces apart at least.
	if !regexp.MustCompile(`(?m)^NAMESPACE {3,}NAME {3,}DESIRED {3,}CURRENT`).MatchString(r.Stdout) {
		t.Errorf("no table header in kubectl's layout:\n%s", r.Stdout)
	}
	found := false
	for _, line := range strings.Split(r.Stdout, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "audit" && f[1] == "plugin-agent" {
			found = f[2] == "4"
		}
	}
	if !found {
		t.Errorf("no row for audit/plugin-agent with DESIRED 4")
	}

	// kubectl's conventions reach the plugin: -l, --no-headers, -o name,
	// --request-timeout, and a namespace from the context when -n is absent.
	r = run("dsguard", "audit", "-A", "-l", "app=plugin-agent", "-o", "name", "--request-timeout", "20s", "--kubeconfig", cluster.Kubeconfig)
	if strings.TrimSpace(r.Stdout) != "daemonset.apps/plugin-agent" {
		t.Errorf("-l app=plugin-agent -o name = %q, want daemonset.apps/plugin-agent", r.Stdout)
	}
	r = run("dsguard", "audit", "-n", "audit", "plugin-agent", "--no-headers", "--kubeconfig", cluster.Kubeconfig)
	if strings.Contains(r.Stdout, "NAMESPACE") || !strings.HasPrefix(r.Stdout, "audit") {
		t.Errorf("--no-headers: %q", r.Stdout)
	}
	r = run("dsguard", "audit", "-n", "audit", "plugin-agent", "-o", "jsonpath={.items[0].placement.runsOn}", "--kubeconfig", cluster.Kubeconfig)
	if r.Stdout != "4" {
		t.Errorf("-o jsonpath={.items[0].placement.runsOn} = %q, want 4", r.Stdout)
	}
	// An unreachable server through --server fails cleanly, not by hanging.
	r = run("dsguard", "audit", "-A", "--kubeconfig", cluster.Kubeconfig, "--server", "https://127.0.0.1:1", "--request-timeout", "5s")
	if r.ExitCode == 0 {
		t.Errorf("--server pointing nowhere: exit 0")
	}
	// Help speaks of the command the user typed.
	if r := run("dsguard", "--help"); !strings.Contains(r.Stdout, "kubectl dsguard [command]") {
		t.Errorf("kubectl dsguard --help does not say kubectl dsguard")
	}
	if r := run("dsguard", "--version"); !strings.HasPrefix(r.Stdout, "dsguard ") {
		t.Errorf("kubectl dsguard --version = %q", r.Stdout)
	}
}
