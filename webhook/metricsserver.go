package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// MetricsServerOptions configure the metrics endpoint.
type MetricsServerOptions struct {
	// Addr is where the server listens (host:port).
	Addr string
	// Secure serves HTTPS with the serving certificate (CertDir, CertName,
	// KeyName, or TLSOpts' GetCertificate); otherwise plain HTTP.
	Secure                     bool
	CertDir, CertName, KeyName string
	TLSOpts                    []func(*tls.Config)
	// Handler answers every path, the authentication filter included.
	Handler http.Handler
	// MaxConnections caps the open connections, evicting as the webhook
	// port does; 0 means DefaultMetricsMaxConnections.
	MaxConnections int
	// OnEvict, when not nil, is called for every connection evicted at the
	// cap.
	OnEvict func()
}

// DefaultMetricsMaxConnections leaves room for a few scrapers and a person
// with curl: Prometheus holds one kept-alive connection per target.
const DefaultMetricsMaxConnections = 32

// MetricsServer serves the metrics port behind the same connection cap and
// deadlines as the webhook port. controller-runtime's metrics server accepts
// connections without limit and waits 32 s for headers, so any Pod could hold
// thousands of connections open there (each new bearer token was bounded by
// the filter, the connections were not).
type MetricsServer struct {
	opts MetricsServerOptions

	mu   sync.Mutex
	addr string
}

// NewMetricsServer returns a server for opts.
func NewMetricsServer(opts MetricsServerOptions) *MetricsServer {
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMetricsMaxConnections
	}
	return &MetricsServer{opts: opts}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica serves its metrics.
func (*MetricsServer) NeedLeaderElection() bool { return false }

// Addr is the address the server listens on once started, "" before.
func (s *MetricsServer) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Start implements manager.Runnable.
func (s *MetricsServer) Start(ctx context.Context) error {
	logger := logf.FromContext(ctx).WithName("metrics-server")
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return err
	}
	guard := newConnGuard(ln, s.opts.MaxConnections, s.opts.OnEvict)
	var served net.Listener = guard
	if s.opts.Secure {
		cfg, err := servingTLS(ctx, s.opts.CertDir, s.opts.CertName, s.opts.KeyName, s.opts.TLSOpts)
		if err != nil {
			_ = ln.Close()
			return err
		}
		served = tls.NewListener(guard, cfg)
	}
	srv := &http.Server{
		BaseContext: func(net.Listener) context.Context { return ctx },
		ConnContext: guard.connContext,
		ConnState:   guard.connState,
		// Every connection stays evictable: a scrape takes milliseconds,
		// and at the cap the source holding the most connections loses
		// one first, so a flood crowds out itself, not Prometheus.
		Handler:           s.opts.Handler,
		MaxHeaderBytes:    16 << 10,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		ErrorLog:          log.New(&throttledLog{out: os.Stderr, interval: 10 * time.Second}, "", log.LstdFlags),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			logger.Error(err, "shutting down the metrics server")
		}
	}()
	s.mu.Lock()
	s.addr = ln.Addr().String()
	s.mu.Unlock()
	logger.Info("serving metrics", "address", ln.Addr().String(), "secure", s.opts.Secure, "maxConnections", s.opts.MaxConnections)
	if err := srv.Serve(served); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}
