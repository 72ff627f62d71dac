package node

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestCertManagerMode_RealNode installs the chart with tls.mode=certManager
// while cert-manager's controller and cainjector run against the node's
// control plane: cert-manager issues the serving certificate, the cainjector
// writes its CA into the webhook configuration, the kubelet mounts the Secret
// into both dsguard Pods, and the API server's calls through the Service are
// answered with it. Then a reissue is forced, as `cmctl renew` does, while
// dry-run creates flow through the API server: the kubelet updates the
// mounted Secret, both Pods serve the new certificate, and every create is
// still answered by dsguard.
func TestCertManagerMode_RealNode(t *testing.T) {
	requireNode(t)
	const (
		cmNamespace = "dsguard-cm"
		cmRelease   = "cm"
		cmFullname  = cmRelease + "-dsguard"
		cmSecret    = cmFullname + "-tls"
	)
	cm, err := cluster.StartCertManager(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cert-manager log:\n%s", cm.Log())
		}
		cm.Stop()
	})
	start := time.Now()
	installRelease(t, "helm", cmRelease, cmNamespace, cmFullname, "--set", "tls.mode=certManager")
	t.Cleanup(func() {
		// The Secret is cert-manager's, not the release's: the namespace
		// goes with it.
		ctx := context.WithoutCancel(t.Context())
		cluster.Helm(ctx, "helm", "uninstall", cmRelease, "-n", cmNamespace, "--wait", "--timeout", "2m")
		cluster.Kubectl(ctx, "", "delete", "namespace", cmNamespace, "--timeout=2m")
	})
	installed := time.Since(start)

	// Issued and injected.
	secret := func() (leaf *x509.Certificate, ca []byte) {
		// Polled: not logged.
		out := framework.Must(t, cluster.Kubectl(t.Context(), "", "get", "secret", "-n", cmNamespace, cmSecret,
			"-o", `jsonpath={.data.tls\.crt} {.data.ca\.crt}`))
		crt64, ca64, _ := strings.Cut(out, " ")
		crt, err := base64.StdEncoding.DecodeString(crt64)
		if err != nil {
			t.Fatal(err)
		}
		if ca, err = base64.StdEncoding.DecodeString(ca64); err != nil || len(ca) == 0 {
			t.Fatalf("the Secret %s has no ca.crt (%v)", cmSecret, err)
		}
		return framework.ParseCertificatePEM(t, crt), ca
	}
	leaf, ca := secret()
	if want := cmFullname + "." + cmNamespace + ".svc"; !strings.Contains(strings.Join(leaf.DNSNames, ","), want) {
		t.Fatalf("the certificate names %v, want %s among them", leaf.DNSNames, want)
	}
	var bundles string
	eventually(t, 60*time.Second, func() bool {
		bundles = cluster.Kubectl(t.Context(), "", "get", "validatingwebhookconfiguration", cmFullname,
			"-o", `jsonpath={range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}`).Stdout
		lines := splitLines(bundles)
		return len(lines) > 0 && strings.Count(bundles, base64.StdEncoding.EncodeToString(ca)+"\n") == len(lines)
	}, func() string { return "caBundles:\n" + bundles })

	// Answered through the Service with that certificate (installRelease
	// waited for dsguard's denial), by both Pods.
	manifest := example(t, "node-exporter.yaml")
	denied := func(ctx context.Context) error {
		r := cluster.Kubectl(ctx, manifest, "apply", "--dry-run=server", "-f", "-")
		if r.Err == nil || !strings.Contains(r.Stderr, "denied the request") || !strings.Contains(r.Stderr, "control-plane-toleration") {
			return fmt.Errorf("want dsguard's denial (control-plane-toleration), got exit %d: %s", r.ExitCode, r.Stderr)
		}
		return nil
	}
	servedBy := func() map[string]*big.Int {
		out := framework.Must(t, cluster.Kubectl(t.Context(), "", "get", "pods", "-n", cmNamespace,
			"-l", "app.kubernetes.io/instance="+cmRelease, "--field-selector=status.phase=Running", "-o",
			`jsonpath={range .items[*]}{.status.podIP}:{.spec.containers[0].ports[?(@.name=="webhook")].containerPort}{" "}{end}`))
		served := map[string]*big.Int{}
		for _, addr := range strings.Fields(out) {
			served[addr] = framework.ServedCertificate(t, addr, ca, cmFullname+"."+cmNamespace+".svc").SerialNumber
		}
		return served
	}
	for addr, serial := range servedBy() {
		if serial.Cmp(leaf.SerialNumber) != 0 {
			t.Fatalf("the Pod at %s serves serial %x, the Secret holds %x", addr, serial, leaf.SerialNumber)
		}
	}
	t.Logf("cert-manager mode: installed and Ready in %s; both Pods serve the issued serial %x", installed.Round(100*time.Millisecond),
		leaf.SerialNumber)

	// Renewed while creates flow through the API server.
	load := framework.StartLoad(t.Context(), 2, denied)
	defer load.Stop()
	triggered := time.Now()
	if err := cm.Renew(t.Context(), cmNamespace, cmSecret); err != nil {
		t.Fatal(err)
	}
	var renewed *x509.Certificate
	reissued := eventually(t, 90*time.Second, func() bool {
		renewed, _ = secret()
		return renewed.SerialNumber.Cmp(leaf.SerialNumber) != 0
	}, func() string { return "the Secret still holds the old certificate" })
	var served map[string]*big.Int
	eventually(t, 2*time.Minute, func() bool {
		served = servedBy()
		for _, serial := range served {
			if serial.Cmp(renewed.SerialNumber) != 0 {
				return false
			}
		}
		return len(served) == 2
	}, func() string {
		return fmt.Sprintf("served serials %x, want %x on both Pods", served, renewed.SerialNumber)
	})
	switched := time.Since(triggered)
	time.Sleep(2 * time.Second) // creates on the new certificate too
	sent, failed, first := load.Stop()
	if sent == 0 {
		t.Fatal("no create was sent during the renewal")
	}
	if failed > 0 {
		t.Fatalf("%d of %d creates during the renewal were not answered by dsguard; the first: %v", failed, sent, first)
	}
	t.Logf("renewal: the Secret held the new serial %x %s after the trigger, both Pods served it %s after; %d creates, none failed",
		renewed.SerialNumber, reissued.Round(100*time.Millisecond), switched.Round(100*time.Millisecond), sent)
	// The mounted Secret was updated in place: no Pod restarted.
	restarts := mustKubectl(t, "", "get", "pods", "-n", cmNamespace, "-l", "app.kubernetes.io/instance="+cmRelease,
		"-o", `jsonpath={range .items[*]}{.status.containerStatuses[0].restartCount}{" "}{end}`)
	for _, n := range strings.Fields(restarts) {
		if n != "0" {
			t.Errorf("a dsguard container restarted during the renewal: restart counts %s", restarts)
		}
	}
}
