package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"sort"
	"time"
)

// maxBundleCAs bounds the caBundle: the current CA and the ones before it
// that may still sign live serving certificates.
const maxBundleCAs = 3

// parseCerts decodes every CERTIFICATE block of a PEM bundle, skipping what
// does not parse.
func parseCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// mergeBundle returns the caBundle to publish: the current CA first, then the
// CAs of the existing bundle that have not expired and are dsguard's own,
// newest first, at most maxBundleCAs in all. The old CA stays while serving
// certificates it signed may still be in use, so a rotation never leaves a
// replica untrusted. Any other CA found there (put in by hand, or left by an
// earlier certificate mode) leaves at the next sync: only dsguard's CAs may
// vouch for its webhook.
func mergeBundle(current *x509.Certificate, existing []byte, now time.Time) []byte {
	certs := []*x509.Certificate{current}
	for _, c := range parseCerts(existing) {
		if c.Equal(current) || !now.Before(c.NotAfter) || !sameLineage(c, current) {
			continue
		}
		certs = append(certs, c)
	}
	sort.SliceStable(certs[1:], func(i, j int) bool { return certs[1+i].NotBefore.After(certs[1+j].NotBefore) })
	if len(certs) > maxBundleCAs {
		certs = certs[:maxBundleCAs]
	}
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

// signedByOneOf reports whether leaf was signed by one of the CAs.
func signedByOneOf(leaf *x509.Certificate, cas []*x509.Certificate) bool {
	for _, ca := range cas {
		if leaf.CheckSignatureFrom(ca) == nil {
			return true
		}
	}
	return false
}

// sameLineage reports whether ca is an earlier CA of the authority that
// issued current: a self-signed CA certificate with the same subject (every
// CA dsguard's authority makes has the subject CommonName
// dsguard-webhook-ca). A CA forged with that subject would pass; writing it
// into the caBundle takes an administrator or dsguard's own ServiceAccount,
// which already holds the CA key.
func sameLineage(ca, current *x509.Certificate) bool {
	return ca.IsCA && bytes.Equal(ca.RawSubject, current.RawSubject) && ca.CheckSignatureFrom(ca) == nil
}
