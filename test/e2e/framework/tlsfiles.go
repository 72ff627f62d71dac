package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// TestCA signs serving certificates for dsguard processes in file mode.
type TestCA struct {
	// PEM is the CA certificate, for a caBundle.
	PEM []byte

	cert *x509.Certificate
	key  *ecdsa.PrivateKey

	mu     sync.Mutex
	serial int64
}

// NewTestCA makes a CA valid for a day.
func NewTestCA(name string) (*TestCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &TestCA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key, serial: 1}, nil
}

// WriteServingCert writes a fresh certificate for localhost and 127.0.0.1
// and its key into dir the way a kubelet updates a mounted Secret: into a
// new directory, then an atomic rename of the ..data symlink that tls.crt
// and tls.key point through, so a reader never sees a certificate with the
// wrong key. It returns the certificate's serial number.
func (ca *TestCA) WriteServingCert(dir string) (int64, error) {
	ca.mu.Lock()
	ca.serial++
	serial := ca.serial
	ca.mu.Unlock()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return 0, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return 0, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return 0, err
	}
	gen := filepath.Join(dir, fmt.Sprintf("..gen-%d", serial))
	if err := os.MkdirAll(gen, 0o700); err != nil {
		return 0, err
	}
	files := map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(gen, name), data, 0o600); err != nil {
			return 0, err
		}
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(gen), tmpLink); err != nil {
		return 0, err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, "..data")); err != nil {
		return 0, err
	}
	for name := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
				return 0, err
			}
		}
	}
	return serial, nil
}
