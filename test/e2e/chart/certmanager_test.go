package chart

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

const (
	cmNamespace = "dsguard-cm"
	cmRelease   = "cm"
	cmFullname  = "cm-dsguard"
	cmSecret    = cmFullname + "-tls"
)

// TestCertManagerMode_IssuedInjectedServedRenewed installs the chart with
// tls.mode=certManager while cert-manager's own controller and cainjector run
// against the API server: the chart's Issuers and Certificates are issued,
// the cainjector writes the CA into the webhook configuration, and dsguard
// (on this machine, its certificate directory kept in step with the Secret
// as the kubelet keeps a mounted Secret) serves the certificate. Then a
// reissue is forced, as `cmctl renew` does, while DaemonSet reviews flow
// through the API server without pause: dsguard serves the new certificate and
// not one review fails.
func TestCertManagerMode_IssuedInjectedServedRenewed(t *testing.T) {
	withoutSuiteWebhook(t)
	start := time.Now()
	cm, err := cluster.StartCertManager(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cm.Stop()
		if t.Failed() {
			t.Logf("cert-manager log:\n%s", cm.Log())
		}
	})
	mustKubectl(t, "", "create", "namespace", cmNamespace)
	webhookPort, healthPort := freePort(t), freePort(t)
	h := helms()[1]
	if r := helm(t, h, "install", cmRelease, "charts/dsguard", "--namespace", cmNamespace, "--set", "tls.mode=certManager",
		"--set", fmt.Sprintf("webhook.url=https://localhost:%d", webhookPort)); r.Err != nil {
		t.Fatal(r.Error())
	}
	t.Cleanup(func() { uninstall(t, h, cmRelease, cmNamespace) })

	// Issued: the CA chain the chart renders, then the serving certificate.
	for _, c := range []string{cmFullname + "-ca", cmSecret} {
		r := kubectl(t, "", "wait", "--for=condition=Ready", "--timeout=90s", "certificate/"+c, "-n", cmNamespace)
		if r.Err != nil {
			t.Fatalf("certificate %s not issued: %v\n%s", c, r.Error(), cm.Log())
		}
	}
	issued := time.Since(start)
	secret := func() (crt, key, ca []byte) {
		s, err := kube.CoreV1().Secrets(cmNamespace).Get(t.Context(), cmSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Data["tls.crt"], s.Data["tls.key"], s.Data["ca.crt"]
	}
	crt, _, ca := secret()
	leaf := framework.ParseCertificatePEM(t, crt)
	if !strings.Contains(strings.Join(leaf.DNSNames, ","), "localhost") {
		t.Fatalf("the certificate names %v, want localhost (the host of webhook.url) among them", leaf.DNSNames)
	}

	// Injected: every webhook's caBundle is the Secret's CA.
	var bundles string
	injected := eventually(t, 60*time.Second, func() bool {
		bundles = kubectl(t, "", "get", "validatingwebhookconfiguration", cmFullname,
			"-o", `jsonpath={range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}`).Stdout
		want := base64.StdEncoding.EncodeToString(ca)
		// The chart's four entries: DaemonSets, infrastructure, policy, Nodes.
		return strings.Count(bundles, want+"\n") == 4
	}, func() string { return "caBundles:\n" + bundles + cm.Log() })

	// Served: the Secret mirrored into a certificate directory, as mounted.
	dir := t.TempDir()
	mirror := mirrorSecret(t, dir)
	cluster.StartDsguardFor(t, "cert-manager mode", healthPort, "serve", "--kubeconfig", cluster.Kubeconfig, "--namespace", cmNamespace,
		"--host", "127.0.0.1", "--port", strconv.Itoa(webhookPort), "--cert-dir", dir,
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(healthPort),
		"--metrics-bind-address", "0", "--leader-elect=false", "--shutdown-timeout", "5s")
	through, err := cluster.ThroughDsguard(kube)
	if err != nil {
		t.Fatal(err)
	}
	probe := func() error { return through(t.Context()) }
	eventually(t, 30*time.Second, func() bool { return probe() == nil }, func() string { return fmt.Sprint(probe()) })
	if got := framework.ServedCertificate(t, "127.0.0.1:"+strconv.Itoa(webhookPort), ca, "localhost").SerialNumber; got.Cmp(leaf.SerialNumber) != 0 {
		t.Fatalf("dsguard serves serial %x, the Secret holds %x", got, leaf.SerialNumber)
	}
	t.Logf("cert-manager: certificates issued %s after start, caBundle injected %s later; dsguard serves serial %x",
		issued.Round(100*time.Millisecond), injected.Round(100*time.Millisecond), leaf.SerialNumber)

	// Renewed under load.
	load := framework.StartLoad(t.Context(), 2, through)
	defer load.Stop()
	time.Sleep(2 * time.Second)
	before := load.Sent()

	triggered := time.Now()
	if err := cm.Renew(t.Context(), cmNamespace, cmSecret); err != nil {
		t.Fatal(err)
	}
	var renewed *x509.Certificate
	eventually(t, 90*time.Second, func() bool {
		c, _, _ := secret()
		renewed = framework.ParseCertificatePEM(t, c)
		return renewed.SerialNumber.Cmp(leaf.SerialNumber) != 0
	}, func() string { return cm.Log() })
	reissued := time.Since(triggered)
	mirror.wait(t, renewed)
	mirrored := time.Since(triggered)
	eventually(t, 60*time.Second, func() bool {
		return framework.ServedCertificate(t, "127.0.0.1:"+strconv.Itoa(webhookPort), ca, "localhost").SerialNumber.Cmp(renewed.SerialNumber) == 0
	}, func() string { return "dsguard still serves the old certificate" })
	served := time.Since(triggered)
	// Keep the load on a little longer with the new certificate served.
	time.Sleep(3 * time.Second)
	sent, failed, first := load.Stop()

	if bytes.Equal(renewed.RawSubjectPublicKeyInfo, leaf.RawSubjectPublicKeyInfo) {
		t.Error("the renewed certificate kept the old key (the chart sets rotationPolicy Always)")
	}
	t.Logf("renewal under load: reissued %s after the trigger, files swapped at %s, served at %s; "+
		"%d reviews through the API server (%d during the renewal), %d failed",
		reissued.Round(100*time.Millisecond), mirrored.Round(100*time.Millisecond), served.Round(100*time.Millisecond),
		sent, sent-before, failed)
	if failed != 0 {
		t.Errorf("%d of %d reviews failed during the renewal; first: %v", failed, sent, first)
	}
	if sent-before < 10 {
		t.Errorf("only %d reviews during the renewal: the load did not cover it", sent-before)
	}
}

// secretMirror keeps a directory in step with the serving Secret, as the
// kubelet keeps a mounted Secret.
type secretMirror struct {
	mu     sync.Mutex
	serial string
}

// mirrorSecret writes the Secret's files into dir now and after every change,
// until the test ends.
func mirrorSecret(t *testing.T, dir string) *secretMirror {
	t.Helper()
	m := &secretMirror{}
	sync := func() error {
		s, err := kube.CoreV1().Secrets(cmNamespace).Get(t.Context(), cmSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		leaf := framework.ParseCertificatePEM(t, s.Data["tls.crt"])
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.serial == leaf.SerialNumber.String() {
			return nil
		}
		if err := framework.WriteSecretFiles(dir, map[string][]byte{
			"tls.crt": s.Data["tls.crt"], "tls.key": s.Data["tls.key"], "ca.crt": s.Data["ca.crt"],
		}); err != nil {
			return err
		}
		m.serial = leaf.SerialNumber.String()
		return nil
	}
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
			if err := sync(); err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
				t.Errorf("mirroring the Secret: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

// wait returns once the mirror has written the certificate.
func (m *secretMirror) wait(t *testing.T, c *x509.Certificate) {
	t.Helper()
	waitFor(t, "the new certificate in the directory", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.serial == c.SerialNumber.String()
	})
}
