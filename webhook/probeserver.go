package webhook

import (
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ProbeServerOptions configure the health probe endpoint (/healthz, /readyz).
type ProbeServerOptions struct {
	// Addr is where the server listens (host:port).
	Addr string
	// Handler answers every path.
	Handler http.Handler
	// MaxConnections caps the open connections; 0 means
	// DefaultProbeMaxConnections.
	MaxConnections int
	// OnEvict, when not nil, is called for every connection evicted at the
	// cap.
	OnEvict func()
}

// DefaultProbeMaxConnections is ample for the kubelet, which opens one
// connection per probe and closes it after the answer (two probes per
// container), plus a person with curl.
const DefaultProbeMaxConnections = 16

const (
	// probeMaxHeaderBytes bounds a probe's headers: the kubelet sends a
	// few hundred bytes. (net/http allows 4 KiB more than this before it
	// answers 431.)
	probeMaxHeaderBytes = 1 << 10
	// probeReadHeaderTimeout: the kubelet's request arrives in one
	// packet; a caller slower than this only holds a place.
	probeReadHeaderTimeout = 2 * time.Second
	// probeIdleTimeout: the kubelet never reuses a probe connection, so a
	// kept-alive one is someone else's.
	probeIdleTimeout = 5 * time.Second
)

// NewProbeServer listens on opts.Addr and returns the probe server as a
// controller-runtime manager.Server, which the manager starts before its
// caches (as its own probe server) and stops last. controller-runtime's own
// probe server takes connections without limit, allows 1 MiB of headers for
// 32 s and keeps idle connections for 90 s, so any source that reaches the
// port (the chart's NetworkPolicy cannot keep out what shares the node's
// address) could hold enough of them to exhaust the container's memory. Here
// connections are capped as on the metrics port: at the cap a new connection
// closes one of the source holding the most, so a flood crowds out itself,
// not the kubelet, whose probes come from the node's address one at a time.
func NewProbeServer(opts ProbeServerOptions) (*manager.Server, error) {
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultProbeMaxConnections
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, err
	}
	guard := newConnGuard(ln, opts.MaxConnections, opts.OnEvict)
	shutdown := 10 * time.Second
	return &manager.Server{
		Name: "health probe",
		Server: &http.Server{
			ConnContext:       guard.connContext,
			ConnState:         guard.connState,
			Handler:           opts.Handler,
			MaxHeaderBytes:    probeMaxHeaderBytes,
			ReadHeaderTimeout: probeReadHeaderTimeout,
			ReadTimeout:       DefaultReadTimeout,
			WriteTimeout:      DefaultWriteTimeout,
			IdleTimeout:       probeIdleTimeout,
			ErrorLog:          log.New(&throttledLog{out: os.Stderr, interval: 10 * time.Second}, "", log.LstdFlags),
		},
		Listener:        guard,
		ShutdownTimeout: &shutdown,
	}, nil
}
