package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultClientIdentities are the names (subject common name or DNS name)
// a client certificate must carry to count as the API server: the name
// dsguard's guide gives the certificate of the API server's webhook
// kubeconfig, and the names of the client certificates kubeadm gives the
// API server (for kubelets and for aggregated API servers), which operators
// often reuse for webhooks. A certificate that merely chains to the client
// CA (a kubeadm cluster CA also signs every admin's and kubelet's) is not
// the API server.
var DefaultClientIdentities = []string{"kube-apiserver-webhook-client", "kube-apiserver-kubelet-client", "front-proxy-client"}

// clientCAReloadInterval is how often the client CA file is checked for a
// change: a mounted ConfigMap changes by an atomic symlink swap, which a
// poll sees as surely as a file watch.
var clientCAReloadInterval = 10 * time.Second

// clientAuth verifies the API server's client certificate against a CA
// bundle that it reloads when the file changes, and against the identities
// the API server's certificate may carry.
type clientAuth struct {
	file       string
	identities []string
	required   bool
	base       *tls.Config

	pem    atomic.Pointer[[]byte]
	config atomic.Pointer[tls.Config] // base with the current pool
}

func newClientAuth(file string, identities []string, required bool, base *tls.Config) (*clientAuth, error) {
	if len(identities) == 0 {
		return nil, errors.New("client authentication needs at least one expected client identity")
	}
	a := &clientAuth{file: file, identities: identities, required: required, base: base}
	if err := a.load(); err != nil {
		return nil, err
	}
	return a, nil
}

// load reads the CA file and, when it changed, serves the new pool; an
// unreadable or empty file keeps the pool in force.
func (a *clientAuth) load() error {
	data, err := os.ReadFile(a.file)
	if err != nil {
		return fmt.Errorf("reading the client CA bundle: %w", err)
	}
	if old := a.pem.Load(); old != nil && bytes.Equal(*old, data) {
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return fmt.Errorf("%s holds no PEM certificate", a.file)
	}
	cfg := a.base.Clone()
	cfg.GetConfigForClient = nil
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	if a.required {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		// A certificate from the CA with another identity is refused
		// at the handshake too.
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if !a.identified(cs) {
				return errors.New("the client certificate does not name an expected API server identity")
			}
			return nil
		}
	}
	a.config.Store(cfg)
	a.pem.Store(&data)
	return nil
}

// watch reloads the CA file every interval until ctx ends.
func (a *clientAuth) watch(ctx context.Context, interval time.Duration) {
	log := logf.FromContext(ctx).WithName("client-ca")
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		before := a.pem.Load()
		if err := a.load(); err != nil {
			log.Error(err, "keeping the client CA bundle in force", "file", a.file)
		} else if a.pem.Load() != before {
			log.Info("reloaded the client CA bundle", "file", a.file)
		}
	}
}

// getConfigForClient serves each handshake the configuration with the
// current pool.
func (a *clientAuth) getConfigForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	return a.config.Load(), nil
}

// identified reports whether the connection's client certificate verified
// against the CA and names an expected identity.
func (a *clientAuth) identified(cs tls.ConnectionState) bool {
	if a == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return false
	}
	leaf := cs.PeerCertificates[0]
	if slices.Contains(a.identities, leaf.Subject.CommonName) {
		return true
	}
	for _, name := range leaf.DNSNames {
		if slices.Contains(a.identities, name) {
			return true
		}
	}
	return false
}
