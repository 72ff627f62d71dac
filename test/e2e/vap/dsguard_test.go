package vap

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/util/cert"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// startDsguard starts a dsguard in mode (vap or vap+webhook) beside the
// suite's own, with a self-signed serving certificate, and waits until it is
// ready. The caller stops it.
func startDsguard(t *testing.T, mode string) *framework.Process {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	webhookPort, healthPort := freePort(t), freePort(t)
	p, err := cluster.StartDsguard(dir, "serve", "--kubeconfig", cluster.Kubeconfig, "--namespace", framework.Namespace,
		"--mode", mode, "--host", "127.0.0.1", "--port", strconv.Itoa(webhookPort), "--cert-dir", dir,
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(healthPort), "--metrics-bind-address", "0",
		"--leader-elect=false", "--shutdown-timeout", "5s")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(t.Context(), healthPort, 60*time.Second); err != nil {
		p.Stop()
		t.Fatalf("%v; dsguard log:\n%s", err, p.Log())
	}
	return p
}
