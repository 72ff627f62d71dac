package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// release and namespace of the chart under test.
const (
	release   = "dsguard"
	namespace = "dsguard-system"
)

func requireNode(t *testing.T) {
	t.Helper()
	if cluster == nil {
		t.Skip("the real-node suite runs with DSGUARD_E2E_NODE=1 as root: make e2e-node")
	}
}

func splitLines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

// kubectl runs the built kubectl against the cluster and logs it.
func kubectl(t *testing.T, stdin string, args ...string) framework.Result {
	t.Helper()
	return framework.Logged(t, cluster.Kubectl(t.Context(), stdin, args...))
}

func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return framework.Must(t, kubectl(t, stdin, args...))
}

// helm runs Helm 3 ("helm") or Helm 4 ("helm4") and logs it.
func helm(t *testing.T, bin string, args ...string) framework.Result {
	t.Helper()
	return framework.Logged(t, cluster.Helm(t.Context(), bin, args...))
}

func mustHelm(t *testing.T, bin string, args ...string) string {
	t.Helper()
	return framework.Must(t, helm(t, bin, args...))
}

// example reads a file of examples/ with replacements (old, new, ...).
func example(t *testing.T, name string, replacements ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cluster.Root, "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(replacements...).Replace(string(b))
}

// eventually retries check every 500ms until it holds or timeout passes,
// then fails the test with last().
func eventually(t *testing.T, timeout time.Duration, check func() bool, last func() string) time.Duration {
	t.Helper()
	return framework.Eventually(t, timeout, 500*time.Millisecond, check, last)
}

func warnings(stderr string) []string {
	var out []string
	for _, l := range splitLines(stderr) {
		if strings.HasPrefix(l, "Warning: ") {
			out = append(out, l)
		}
	}
	return out
}
