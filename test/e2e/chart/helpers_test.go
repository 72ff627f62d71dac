package chart

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// helmBin is one Helm binary the chart must install with.
type helmBin struct {
	name string // helm3 or helm4
	path string
}

// helms returns Helm 3 and Helm 4 as hack/tools.sh builds them.
func helms() []helmBin {
	return []helmBin{
		{name: "helm3", path: filepath.Join(cluster.Tools, "helm")},
		{name: "helm4", path: filepath.Join(cluster.Tools, "helm4")},
	}
}

// helm runs a Helm binary against the test cluster, in the repository root,
// with its own empty configuration (no repositories, no plugins).
func helm(t *testing.T, h helmBin, args ...string) framework.Result {
	t.Helper()
	return helmWith(t, t.Context(), h, args...)
}

func helmWith(t *testing.T, ctx context.Context, h helmBin, args ...string) framework.Result {
	t.Helper()
	home := t.TempDir()
	env := []string{"HELM_CONFIG_HOME=" + home, "HELM_CACHE_HOME=" + home, "HELM_DATA_HOME=" + home}
	r := runCmd(ctx, "", env, h.path, append(args, "--kubeconfig", cluster.Kubeconfig)...)
	t.Logf("$ %s %s\n%s%s", h.name, strings.Join(args, " "), r.Stdout, r.Stderr)
	return r
}

// uninstall runs `helm uninstall` without the pre-delete hook: this API
// server has no kubelet, so the hook's Job would never run (hooks_test.go
// runs its command itself).
//
// It often runs in a t.Cleanup, when t.Context() is already cancelled: it has
// a context of its own.
func uninstall(t *testing.T, h helmBin, release, ns string) framework.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return helmWith(t, ctx, h, "uninstall", release, "--namespace", ns, "--no-hooks")
}

// kubectl runs the built kubectl against the test cluster and logs it.
func kubectl(t *testing.T, stdin string, args ...string) framework.Result {
	t.Helper()
	return framework.Logged(t, cluster.Kubectl(t.Context(), stdin, args...))
}

// mustKubectl fails the test when kubectl fails.
func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return framework.Must(t, kubectl(t, stdin, args...))
}

func runCmd(ctx context.Context, stdin string, env []string, bin string, args ...string) framework.Result {
	return framework.Run(ctx, cluster.Root, stdin, env, bin, args...)
}

// eventually retries check every 250ms until it returns true or timeout
// passes; it returns the time it took, or fails the test with last().
func eventually(t *testing.T, timeout time.Duration, check func() bool, last func() string) time.Duration {
	t.Helper()
	return framework.Eventually(t, timeout, 250*time.Millisecond, check, last)
}

// getJSON returns an object as a map.
func getJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out := mustKubectl(t, "", append([]string{"get", "-o", "json"}, args...)...)
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// field walks map keys and list indexes.
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// example reads a file of examples/.
func example(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.Root, "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// denied reports whether kubectl was refused by the named webhook with every fragment.
func denied(r framework.Result, webhook string, fragments ...string) bool {
	if r.ExitCode != 1 || !strings.Contains(r.Stderr, `admission webhook "`+webhook+`" denied the request`) {
		return false
	}
	for _, f := range fragments {
		if !strings.Contains(r.Stderr, f) {
			return false
		}
	}
	return true
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every 100ms for up to 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, 100*time.Millisecond, cond, func() string { return "waiting for " + what })
}

// withoutSuiteWebhook deletes the webhook configuration framework.Start
// installed, so that only the release the test installs answers, and puts it
// back (with the suite's policy ConfigMap) when the test ends: no test
// depends on another having removed it, or on none having done so.
func withoutSuiteWebhook(t *testing.T) {
	t.Helper()
	mustKubectl(t, "", "delete", "validatingwebhookconfiguration", "dsguard", "--ignore-not-found")
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, 2*time.Minute)
		defer cancel()
		if err := cluster.InstallFromChart(ctx, caBundle); err != nil {
			t.Errorf("cleanup: restoring the suite's webhook configuration: %v", err)
		}
	})
}

// waitEstablished waits until the CustomResourceDefinition name is Established.
func waitEstablished(t *testing.T, name string) {
	t.Helper()
	if err := framework.WaitEstablished(t.Context(), cluster.Kubectl, name, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// servingCertDir is a new directory holding a self-signed serving
// certificate for 127.0.0.1 (tls.crt, tls.key), for a dsguard started on
// this machine; it returns the certificate too, for a caBundle.
func servingCertDir(t *testing.T) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "tls.crt"), string(certPEM))
	writeFile(t, filepath.Join(dir, "tls.key"), string(keyPEM))
	return dir, certPEM
}
