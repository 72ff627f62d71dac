package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

func caFingerprints(data []byte) []string {
	var out []string
	for _, c := range caCerts(data) {
		out = append(out, c.SerialNumber.String())
	}
	return out
}

// TestSelfManaged_StartsWithoutCertificates: dsguard created its CA Secret
// and put the CA into the caBundle of its webhook configuration (the chart
// rendered it empty), and kubectl is rejected and warned through it.
func TestSelfManaged_StartsWithoutCertificates(t *testing.T) {
	secret, err := kube.CoreV1().Secrets(framework.Namespace).Get(t.Context(), "dsguard-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the CA Secret: %v", err)
	}
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), "dsguard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := caFingerprints(secret.Data["ca.crt"])
	for _, w := range vwc.Webhooks {
		if bundle := caFingerprints(w.ClientConfig.CABundle); len(ca) == 0 || !contains(bundle, ca[0]) {
			t.Errorf("webhook %s: caBundle %v lacks the CA %v", w.Name, bundle, ca)
		}
	}
	cluster.DeleteOnCleanup(t, "-f", "examples/node-exporter.yaml", "-f", "examples/log-shipper-half-fleet.yaml")
	r := cluster.Kubectl(t.Context(), "", "apply", "-f", "examples/node-exporter.yaml")
	if r.ExitCode != 1 || !strings.Contains(r.Stderr, `admission webhook "daemonsets.dsguard.io" denied the request`) {
		t.Errorf("node-exporter: exit %d\n%s", r.ExitCode, r.Stderr)
	}
	r = cluster.Kubectl(t.Context(), "", "apply", "-f", "examples/log-shipper-half-fleet.yaml")
	if r.ExitCode != 0 || !strings.Contains(r.Stderr, "Warning: max-unavailable:") {
		t.Errorf("log-shipper: exit %d\n%s", r.ExitCode, r.Stderr)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestSelfManaged_ReplicasConvergeOnOneCA starts a second replica with the
// same settings: it finds the CA Secret the first one made and serves a
// certificate signed by the same CA.
func TestSelfManaged_ReplicasConvergeOnOneCA(t *testing.T) {
	port, health := freePort(t), freePort(t)
	cluster.StartDsguardFor(t, "second replica", health, append([]string{"serve", "--kubeconfig", cluster.Kubeconfig,
		"--namespace", framework.Namespace,
		"--cert-mode=self-managed", "--cert-dns-names=localhost", "--webhook-config-name=dsguard",
		"--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(health), "--metrics-bind-address", "0",
		"--shutdown-timeout", "5s"}, dsguardArgs...)...)

	issuer := func(hostPort string) string {
		conn, err := tls.Dial("tcp", hostPort, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the issuer is read
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return string(conn.ConnectionState().PeerCertificates[0].RawIssuer)
	}
	u, err := url.Parse(cluster.WebhookURL)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := kube.CoreV1().Secrets(framework.Namespace).Get(t.Context(), "dsguard-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cas := caCerts(secret.Data["ca.crt"])
	first, second := issuer(u.Host), issuer(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if first != second || len(cas) == 0 || string(cas[0].RawSubject) != second {
		t.Errorf("replicas serve certificates of different CAs, or not of the Secret's CA")
	}
}

func caCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// TestSelfManaged_CARotationUnderLoad sends requests through the webhook
// without pause while the CA rotates (60s CA, renewed every ~40s; 15s serving
// certificates): not one may fail.
func TestSelfManaged_CARotationUnderLoad(t *testing.T) {
	create := throughDsguard(t, "default")
	first, err := kube.CoreV1().Secrets(framework.Namespace).Get(t.Context(), "dsguard-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	firstCA := caFingerprints(first.Data["ca.crt"])

	var ok, failed atomic.Int64
	var lastFailure atomic.Value
	deadline := time.Now().Add(95 * time.Second)

	// The API server keeps its connections to dsguard open, so it shakes
	// hands rarely. A second client does what a restarted API server (or a
	// new connection) does: a fresh TLS handshake each time, trusting exactly
	// the caBundle published at that moment.
	var handshakes, handshakeFailures atomic.Int64
	var lastHandshakeFailure atomic.Value
	u, err := url.Parse(cluster.WebhookURL)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(deadline) {
			v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), "dsguard", metav1.GetOptions{})
			if err != nil {
				continue
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(v.Webhooks[0].ClientConfig.CABundle)
			conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
			handshakes.Add(1)
			if err != nil {
				handshakeFailures.Add(1)
				lastHandshakeFailure.Store(err)
			} else {
				conn.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	seenCAs := map[string]bool{firstCA[0]: true}
	maxBundle := 0
	for time.Now().Before(deadline) {
		if err := create(); err == nil {
			ok.Add(1)
		} else {
			failed.Add(1)
			lastFailure.Store(err)
		}
		if ok.Load()%20 == 0 {
			if s, err := kube.CoreV1().Secrets(framework.Namespace).Get(t.Context(), "dsguard-ca", metav1.GetOptions{}); err == nil {
				for _, fp := range caFingerprints(s.Data["ca.crt"]) {
					seenCAs[fp] = true
				}
			}
			if v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), "dsguard", metav1.GetOptions{}); err == nil {
				maxBundle = max(maxBundle, len(caFingerprints(v.Webhooks[0].ClientConfig.CABundle)))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("requests through the webhook: %d answered, %d failed; fresh TLS handshakes against the published caBundle: %d, %d failed; CAs seen: %d; largest caBundle: %d CAs",
		ok.Load(), failed.Load(), handshakes.Load(), handshakeFailures.Load(), len(seenCAs), maxBundle)
	if handshakeFailures.Load() > 0 {
		t.Errorf("%d fresh handshakes failed; last: %v", handshakeFailures.Load(), lastHandshakeFailure.Load())
	}
	if failed.Load() > 0 {
		t.Errorf("%d requests failed; last: %v", failed.Load(), lastFailure.Load())
	}
	if len(seenCAs) < 2 {
		t.Errorf("the CA did not rotate during the test (seen %d)", len(seenCAs))
	}
	if maxBundle < 2 {
		t.Errorf("the caBundle never held the old and the new CA together (max %d)", maxBundle)
	}
	log := cluster.DsguardLog()
	if !strings.Contains(log, "CA rotated") {
		t.Errorf("dsguard did not log the rotation")
	}
}
