package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "file-mode-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// writeLeaf writes a fresh serving certificate and key into dir the way a
// kubelet updates a mounted Secret: into a new directory, then an atomic
// rename of the symlink the files point through.
func (ca testCA) writeLeaf(t *testing.T, dir string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(dir, fmt.Sprintf("..gen-%d", serial))
	if err := os.MkdirAll(gen, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gen, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gen, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(gen), tmpLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFileMode_CertificateSwappedUnderLoad runs dsguard with --cert-mode=file
// on a certificate directory laid out like a mounted Secret, replaces the
// certificate and key every two seconds while requests flow through the API
// server and fresh TLS handshakes probe it, and counts failures: none.
func TestFileMode_CertificateSwappedUnderLoad(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	ca.writeLeaf(t, dir, 100)

	port, health := freePort(t), freePort(t)
	cluster.StartDsguardFor(t, "file mode", health, "serve", "--kubeconfig", cluster.Kubeconfig, "--namespace", "dsguard-file",
		"--cert-mode=file", "--cert-dir", dir, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(health), "--metrics-bind-address", "0",
		"--leader-elect=false", "--shutdown-timeout", "5s")

	r := cluster.Helm(t.Context(), "template", "file", "charts/dsguard", "--namespace", "dsguard-file",
		"--set", fmt.Sprintf("webhook.url=https://127.0.0.1:%d", port),
		"--set", "webhook.caBundle="+base64.StdEncoding.EncodeToString(ca.pem),
		"--show-only", "templates/validatingwebhookconfiguration.yaml")
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	if a := cluster.Kubectl(t.Context(), r.Stdout, "apply", "-f", "-"); a.Err != nil {
		t.Fatal(a.Error())
	}
	// Before the dsguard behind it stops (cleanups run last-first): its
	// entries fail closed, and every later DaemonSet write would fail.
	cluster.DeleteOnCleanup(t, "validatingwebhookconfiguration", "file-dsguard")

	// Only this dsguard may answer the probe: it asks in the suite
	// dsguard's own namespace, which that dsguard's configuration leaves
	// out and this one's (for namespace dsguard-file) does not. The shared
	// configuration stays, so the other tests do not depend on running
	// before this one.
	create := throughDsguard(t, framework.Namespace)
	// The configuration takes effect in the API server shortly after apply.
	deadline := time.Now().Add(30 * time.Second)
	for create() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the file-mode webhook does not answer: %v", create())
		}
		time.Sleep(100 * time.Millisecond)
	}

	var answered, failed, handshakes, handshakeFailures atomic.Int64
	var lastFailure atomic.Value
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	stop := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // through the API server
		defer wg.Done()
		for time.Now().Before(stop) {
			if err := create(); err != nil {
				failed.Add(1)
				lastFailure.Store(err)
			} else {
				answered.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() { // fresh handshakes
		defer wg.Done()
		for time.Now().Before(stop) {
			conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
				&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
			handshakes.Add(1)
			if err != nil {
				handshakeFailures.Add(1)
				lastFailure.Store(err)
			} else {
				conn.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	swaps := 0
	for serial := int64(101); time.Now().Before(stop.Add(-2 * time.Second)); serial++ {
		time.Sleep(2 * time.Second)
		ca.writeLeaf(t, dir, serial)
		swaps++
	}
	wg.Wait()
	t.Logf("%d certificate swaps: %d requests answered, %d failed; %d fresh handshakes, %d failed",
		swaps, answered.Load(), failed.Load(), handshakes.Load(), handshakeFailures.Load())
	if failed.Load()+handshakeFailures.Load() > 0 {
		t.Errorf("failures during certificate swaps; last: %v", lastFailure.Load())
	}
	// dsguard really serves the newest certificate.
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); got < 100+int64(swaps)-1 {
		t.Errorf("served certificate serial %d, want the newest (%d)", got, 100+swaps)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
