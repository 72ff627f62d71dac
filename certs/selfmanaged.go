package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	cmtls "github.com/cert-manager/cert-manager/pkg/server/tls"
	"github.com/cert-manager/cert-manager/pkg/server/tls/authority"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SelfManagedOptions configure a self-managed certificate authority.
type SelfManagedOptions struct {
	// Namespace and SecretName of the Secret that holds the CA (created when
	// missing). All replicas share it.
	Namespace, SecretName string
	// WebhookConfigName is dsguard's ValidatingWebhookConfiguration, whose
	// caBundle is kept in step. No other object is ever patched.
	WebhookConfigName string
	// DNSNames of the serving certificate (the Service's names, or
	// localhost for a webhook reached by URL).
	DNSNames []string
	// CADuration and LeafDuration are the lifetimes; each is renewed when a
	// third of it is left.
	CADuration, LeafDuration time.Duration
	// PublishGrace is how long a CA must have been in the caBundle before
	// certificates it signs are served: time for every API server to load
	// the new webhook configuration.
	PublishGrace time.Duration
	// SyncInterval is how often the caBundle is checked against the CA.
	SyncInterval time.Duration

	RESTConfig *rest.Config
	// Client reads the Secret and updates the webhook configuration; it
	// must not be a cached client (the objects are not watched).
	Client   client.Client
	Recorder events.EventRecorder
	Log      logr.Logger
	Metrics  *Metrics
}

// SelfManaged serves certificates signed by a CA it keeps itself.
type SelfManaged struct {
	opts   SelfManagedOptions
	source *cmtls.DynamicSource

	mu sync.Mutex
	// publishedAt records when each CA (by raw bytes) was first seen in the
	// caBundle; a CA is trusted for serving once PublishGrace has passed.
	publishedAt map[string]time.Time
	published   []*x509.Certificate
	currentCA   *x509.Certificate
	// synced is set after the first successful look at the caBundle.
	synced bool
}

// NewSelfManaged prepares the authority; Start runs it.
func NewSelfManaged(opts SelfManagedOptions) *SelfManaged {
	s := &SelfManaged{opts: opts, publishedAt: map[string]time.Time{}}
	s.source = &cmtls.DynamicSource{
		DNSNames: opts.DNSNames,
		Authority: &gatedAuthority{
			Authority: &authority.DynamicAuthority{
				SecretNamespace: opts.Namespace, SecretName: opts.SecretName, RESTConfig: opts.RESTConfig,
				CommonName: "dsguard-webhook-ca", CADuration: opts.CADuration, LeafDuration: opts.LeafDuration,
				SecretLabels: map[string]string{"app.kubernetes.io/managed-by": "dsguard"},
			},
			trusted: s.trustedCAs,
		},
		RetryInterval: time.Second,
	}
	return s
}

// SetRecorder sets where CA rotations are reported as Events (the manager's
// recorder exists only after the manager, which needs GetCertificate first).
func (s *SelfManaged) SetRecorder(r events.EventRecorder) { s.opts.Recorder = r }

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica serves, so every replica keeps its certificate.
func (s *SelfManaged) NeedLeaderElection() bool { return false }

// GetCertificate is the webhook server's tls.Config.GetCertificate.
func (s *SelfManaged) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.source.GetCertificate(hello)
}

// ReadyCheck is a healthz checker: ready once a certificate is served.
func (s *SelfManaged) ReadyCheck(_ *http.Request) error {
	if !s.source.Healthy() {
		return errors.New("no serving certificate yet")
	}
	return nil
}

// Start implements manager.Runnable: it runs the CA and the serving
// certificate (cert-manager's DynamicSource) and keeps the caBundle in step.
func (s *SelfManaged) Start(ctx context.Context) error {
	errs := make(chan error, 1)
	go func() { errs <- s.source.Start(ctx) }()
	interval := s.opts.SyncInterval
	if interval == 0 {
		interval = 5 * time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if err := s.syncBundle(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Error(err, "keeping the webhook caBundle in step with the CA")
		}
		s.recordExpiry()
		select {
		case err := <-errs:
			return err
		case <-ctx.Done():
			return <-errs
		case <-tick.C:
		}
	}
}

// syncBundle publishes the current CA in the caBundle of every webhook of
// dsguard's configuration, keeping the previous CAs until they expire, and
// notes when each CA was first seen published.
func (s *SelfManaged) syncBundle(ctx context.Context) error {
	var secret corev1.Secret
	err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: s.opts.Namespace, Name: s.opts.SecretName}, &secret)
	if apierrors.IsNotFound(err) {
		return nil // the authority creates it
	}
	if err != nil {
		return fmt.Errorf("reading the CA Secret: %w", err)
	}
	cas := parseCerts(secret.Data["ca.crt"])
	if len(cas) == 0 {
		return nil
	}
	current := cas[0]
	s.noteRotation(&secret, current)

	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Name: s.opts.WebhookConfigName}, &vwc); err != nil {
		return fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", s.opts.WebhookConfigName, err)
	}
	now := time.Now()
	changed := false
	var before, bundle []byte
	if len(vwc.Webhooks) > 0 {
		before = vwc.Webhooks[0].ClientConfig.CABundle
	}
	for i := range vwc.Webhooks {
		cc := &vwc.Webhooks[i].ClientConfig
		merged := mergeBundle(current, cc.CABundle, now)
		if string(merged) != string(cc.CABundle) {
			cc.CABundle = merged
			changed = true
		}
		bundle = cc.CABundle
	}
	if changed {
		// An Update carries the resourceVersion: a concurrent change by
		// another replica makes this one retry on the next tick.
		if err := s.opts.Client.Update(ctx, &vwc); err != nil {
			return fmt.Errorf("updating the caBundle of %s: %w", s.opts.WebhookConfigName, err)
		}
		s.opts.Log.Info("caBundle updated", "webhookConfiguration", s.opts.WebhookConfigName, "cas", len(parseCerts(bundle)))
	}
	s.notePublished(parseCerts(bundle), parseCerts(before), now)
	return nil
}

func (s *SelfManaged) noteRotation(secret *corev1.Secret, current *x509.Certificate) {
	s.mu.Lock()
	previous := s.currentCA
	s.currentCA = current
	s.mu.Unlock()
	if previous == nil || previous.Equal(current) {
		return
	}
	s.opts.Log.Info("CA rotated", "secret", s.opts.SecretName, "notAfter", current.NotAfter)
	if s.opts.Recorder != nil {
		s.opts.Recorder.Eventf(secret, nil, corev1.EventTypeNormal, "CARotated", "RotateCA",
			"new webhook CA valid until %s; the old one stays trusted until it expires", current.NotAfter.Format(time.RFC3339))
	}
	if s.opts.Metrics != nil {
		s.opts.Metrics.Rotations.Inc()
	}
}

// notePublished records the CAs of the caBundle and when each was first
// seen there. On the first sync after a start, CAs that were already in the
// bundle before this replica touched it have been trusted for an unknown,
// likely long time: they count as published long ago, so a restart does not
// wait out the grace period.
func (s *SelfManaged) notePublished(cas, before []*x509.Certificate, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]time.Time{}
	for _, ca := range cas {
		key := string(ca.Raw)
		switch t, ok := s.publishedAt[key]; {
		case ok:
			seen[key] = t
		case !s.synced && slices.ContainsFunc(before, ca.Equal):
			seen[key] = time.Time{}
		default:
			seen[key] = now
		}
	}
	s.publishedAt = seen
	s.published = cas
	s.synced = true
}

// trustedCAs returns the CAs that have been in the caBundle for at least
// PublishGrace: certificates they sign may be served.
func (s *SelfManaged) trustedCAs() []*x509.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*x509.Certificate
	for _, ca := range s.published {
		if time.Since(s.publishedAt[string(ca.Raw)]) >= s.opts.PublishGrace {
			out = append(out, ca)
		}
	}
	return out
}

func (s *SelfManaged) recordExpiry() {
	m := s.opts.Metrics
	if m == nil {
		return
	}
	s.mu.Lock()
	ca := s.currentCA
	s.mu.Unlock()
	if ca != nil {
		m.Expiry.WithLabelValues("ca").Set(float64(ca.NotAfter.Unix()))
	}
	if cert, err := s.source.GetCertificate(nil); err == nil && len(cert.Certificate) > 0 {
		if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err == nil {
			m.Expiry.WithLabelValues("serving").Set(float64(leaf.NotAfter.Unix()))
		}
	}
}

// gatedAuthority signs with the CA of the Secret, but hands out a serving
// certificate only when the API servers already trust its CA. Until then the
// DynamicSource keeps serving its previous certificate (signed by the old
// CA, still trusted) and retries every second.
type gatedAuthority struct {
	cmtls.Authority
	trusted func() []*x509.Certificate
}

func (g *gatedAuthority) Sign(template *x509.Certificate) (*x509.Certificate, error) {
	cert, err := g.Authority.Sign(template)
	if err != nil {
		return nil, err
	}
	if !signedByOneOf(cert, g.trusted()) {
		return nil, fmt.Errorf("%w: its CA is not yet in the webhook configuration's caBundle", authority.ErrCertificateNotAvailable)
	}
	return cert, nil
}

// Metrics are the certificate gauges.
type Metrics struct {
	Expiry    *prometheus.GaugeVec
	Rotations prometheus.Counter
}

// NewMetrics creates and registers the certificate metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dsguard_certificate_expiry_timestamp_seconds",
			Help: "When the serving certificate and the CA expire (Unix time), by certificate (serving, ca).",
		}, []string{"certificate"}),
		Rotations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dsguard_ca_rotations_total",
			Help: "CA rotations this replica has seen.",
		}),
	}
	reg.MustRegister(m.Expiry, m.Rotations)
	return m
}
