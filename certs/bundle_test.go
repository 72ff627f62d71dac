package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/server/tls/authority"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T, serial int64, notBefore, notAfter time.Time) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert, key}
}

func (ca testCA) sign(t *testing.T, template *x509.Certificate) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template.SerialNumber = big.NewInt(99)
	template.NotBefore, template.NotAfter = now.Add(-time.Hour), now.Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func serials(certs []*x509.Certificate) []int64 {
	var out []int64
	for _, c := range certs {
		out = append(out, c.SerialNumber.Int64())
	}
	return out
}

func TestMergeBundle(t *testing.T) {
	expired := newCA(t, 1, now.Add(-48*time.Hour), now.Add(-time.Hour))
	older := newCA(t, 2, now.Add(-30*time.Hour), now.Add(time.Hour))
	old := newCA(t, 3, now.Add(-20*time.Hour), now.Add(2*time.Hour))
	previous := newCA(t, 4, now.Add(-10*time.Hour), now.Add(3*time.Hour))
	current := newCA(t, 5, now.Add(-time.Hour), now.Add(24*time.Hour))
	// Another issuer's CA, valid and newer than the current one.
	foreign := newCA(t, 6, now.Add(-time.Minute), now.Add(48*time.Hour))
	foreign.cert = reissue(t, foreign, "someone-else-ca")
	bundleOf := func(cas ...testCA) []byte {
		var certs []*x509.Certificate
		for _, c := range cas {
			certs = append(certs, c.cert)
		}
		var b []byte
		for _, c := range certs {
			b = append(b, mergeBundle(c, nil, now)...)
		}
		return b
	}
	tests := []struct {
		name     string
		existing []byte
		want     []int64
	}{
		{"empty bundle gets the CA", nil, []int64{5}},
		{"garbage is replaced", []byte("not PEM"), []int64{5}},
		{"already published stays one copy", bundleOf(current), []int64{5}},
		{"the previous CA stays while it is valid", bundleOf(previous), []int64{5, 4}},
		{"expired CAs leave", bundleOf(expired, previous), []int64{5, 4}},
		{"at most three, newest first", bundleOf(older, old, previous), []int64{5, 4, 3}},
		{"a foreign CA leaves", bundleOf(foreign, previous), []int64{5, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := serials(parseCerts(mergeBundle(current.cert, tt.existing, now)))
			if len(got) != len(tt.want) {
				t.Fatalf("bundle = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("bundle = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// fakeAuthority signs with one CA; the gate decides whether to hand it out.
type fakeAuthority struct {
	authority.DynamicAuthority
	ca testCA
	t  *testing.T
}

func (f *fakeAuthority) Sign(template *x509.Certificate) (*x509.Certificate, error) {
	return f.ca.sign(f.t, template), nil
}

func TestGatedAuthority_ServesOnlyWhatIsTrusted(t *testing.T) {
	oldCA := newCA(t, 1, now.Add(-time.Hour), now.Add(time.Hour))
	newCA := newCA(t, 2, now.Add(-time.Minute), now.Add(2*time.Hour))
	trusted := []*x509.Certificate{oldCA.cert}
	g := &gatedAuthority{Authority: &fakeAuthority{ca: newCA, t: t}, trusted: func() []*x509.Certificate { return trusted }}

	if _, err := g.Sign(&x509.Certificate{DNSNames: []string{"localhost"}}); !errors.Is(err, authority.ErrCertificateNotAvailable) {
		t.Fatalf("a certificate of a CA not yet published: err = %v, want ErrCertificateNotAvailable", err)
	}
	trusted = append(trusted, newCA.cert)
	cert, err := g.Sign(&x509.Certificate{DNSNames: []string{"localhost"}})
	if err != nil || !signedByOneOf(cert, []*x509.Certificate{newCA.cert}) {
		t.Fatalf("once published: cert %v, err %v", cert, err)
	}
}

func TestSelfManaged_TrustedCAsWaitForTheGrace(t *testing.T) {
	ca := newCA(t, 1, now.Add(-time.Hour), now.Add(time.Hour))
	s := &SelfManaged{opts: SelfManagedOptions{PublishGrace: time.Hour}, publishedAt: map[string]time.Time{}}
	s.notePublished([]*x509.Certificate{ca.cert}, nil, time.Now())
	if len(s.trustedCAs()) != 0 {
		t.Error("a CA published a moment ago must not be trusted before the grace period")
	}
	s.notePublished([]*x509.Certificate{ca.cert}, nil, time.Now())
	s.publishedAt[string(ca.cert.Raw)] = time.Now().Add(-2 * time.Hour)
	if len(s.trustedCAs()) != 1 {
		t.Error("a CA published for longer than the grace period must be trusted")
	}
	s.notePublished(nil, nil, time.Now())
	if len(s.trustedCAs()) != 0 {
		t.Error("a CA gone from the bundle must not be trusted")
	}

	// After a restart, a CA that was in the bundle before is trusted at once.
	restarted := &SelfManaged{opts: SelfManagedOptions{PublishGrace: time.Hour}, publishedAt: map[string]time.Time{}}
	restarted.notePublished([]*x509.Certificate{ca.cert}, []*x509.Certificate{ca.cert}, time.Now())
	if len(restarted.trustedCAs()) != 1 {
		t.Error("a CA already published before the first sync must be trusted without waiting")
	}
}

// reissue makes ca's certificate again with another subject.
func reissue(t *testing.T, ca testCA, commonName string) *x509.Certificate {
	t.Helper()
	tmpl := *ca.cert
	tmpl.Subject = pkix.Name{CommonName: commonName}
	tmpl.RawSubject, tmpl.RawIssuer = nil, nil
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, ca.key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
