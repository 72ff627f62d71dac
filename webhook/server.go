package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// ServerOptions configure the hardened webhook server.
type ServerOptions struct {
	// Host and Port are where the server listens.
	Host string
	Port int
	// CertDir, CertName and KeyName name the serving certificate files,
	// reloaded on change; unused when a TLS option sets GetCertificate.
	CertDir, CertName, KeyName string
	// TLSOpts adjust the TLS configuration (minimum version, ciphers,
	// GetCertificate).
	TLSOpts []func(*tls.Config)
	// ClientCAFile, when set, is a PEM bundle of the CAs whose client
	// certificates authenticate the API server.
	ClientCAFile string
	// RequireClientCert refuses the TLS handshake of callers without a
	// client certificate from ClientCAFile with an expected identity.
	// Without it a certificate is verified when given, and callers without
	// one get verdicts that name no nodes (see Authenticated).
	RequireClientCert bool
	// ClientIdentities are the names (subject common name or DNS name) a
	// client certificate must carry to authenticate the API server; empty
	// means DefaultClientIdentities. The CA file is reloaded when it
	// changes.
	ClientIdentities []string
	// MaxConnections caps the open connections. When the cap is reached, a
	// new connection evicts the oldest one that has not delivered a whole
	// request yet (or is idle), so slow clients crowd out each other, not
	// the API server, whose requests arrive whole within milliseconds.
	MaxConnections int
	// ReadHeaderTimeout bounds the TLS handshake and the request headers;
	// ReadTimeout the whole request, body included; WriteTimeout the
	// response; IdleTimeout a kept-alive connection between requests.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// HeavyWaiting, when not nil, counts the requests waiting for the
	// heavy lane the server shares with the DaemonSet handler.
	HeavyWaiting prometheus.Gauge
	// LargeBodyBudget bounds the bytes of request bodies over
	// LargeReviewBytes held at once, counted as they arrive; 0 means
	// DefaultLargeBodyBudget.
	LargeBodyBudget int64
	// BodyGrace and MinBodyRate are the pace a body must arrive at: by
	// BodyGrace after the request began plus one second per MinBodyRate
	// bytes, or the connection is cut (0: DefaultBodyGrace,
	// DefaultMinBodyRate).
	BodyGrace   time.Duration
	MinBodyRate int64
	// Refusals, when not nil, counts refused requests and connections by
	// reason and caller (see the Refused* and Caller* constants).
	Refusals *prometheus.CounterVec
	// APIServerAddresses, used only without client authentication, are
	// the source addresses the API server's calls are expected from (the
	// addresses it advertises, or its control plane's subnet). A request
	// from one of them gets the API server's reserved shares of the body
	// budget and the heavy lane, and its connection is evicted after
	// everyone else's. An address is not an identity: it only decides who
	// waits, never a verdict. Once a review has arrived from one of them,
	// reviews from other sources are answered but no longer counted in the
	// decision series the alerts read (see Unverified): where the API
	// server calls from elsewhere (a konnectivity agent), nothing changes.
	APIServerAddresses []netip.Prefix
}

// Defaults of ServerOptions: the API server sends a review whole, at once,
// and waits at most 30 s (the longest webhook timeout) for the answer.
const (
	DefaultMaxConnections    = 256
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	// DefaultLargeBodyBudget holds four reviews of the largest size
	// controller-runtime accepts, or twenty of 1.5 MB. Bodies up to
	// LargeReviewBytes need no budget: the connection cap bounds them
	// (256 × 256 KiB).
	DefaultLargeBodyBudget = 4 * (maxReviewBytes + 1)
)

// Server is the webhook server: controller-runtime's webhook server for
// registration and its request metrics, served by an http.Server with
// per-connection deadlines and a connection cap in front, which
// controller-runtime's own listener lacks (it never times out a slow
// request body and accepts connections without limit).
type Server struct {
	crwebhook.Server
	// uncounted serves the same handlers without controller-runtime's
	// request metrics, for callers that are not known to be the API
	// server (see Register).
	uncounted *http.ServeMux
	opts      ServerOptions
	evicted   func() // called per evicted connection; may be nil

	mu       sync.Mutex
	limited  map[string]int // lane widths of the paths RegisterLimited registered
	started  bool
	addr     string
	draining atomic.Bool
}

// NewServer returns a server for opts, with defaults for zero limits.
// onEvict, when not nil, is called for every connection evicted at the cap.
func NewServer(opts ServerOptions, onEvict func()) *Server {
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.LargeBodyBudget <= 0 {
		opts.LargeBodyBudget = DefaultLargeBodyBudget
	}
	if opts.MinBodyRate <= 0 {
		opts.MinBodyRate = DefaultMinBodyRate
	}
	if len(opts.ClientIdentities) == 0 {
		opts.ClientIdentities = DefaultClientIdentities
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&opts.ReadHeaderTimeout, DefaultReadHeaderTimeout}, {&opts.ReadTimeout, DefaultReadTimeout}, {&opts.BodyGrace, DefaultBodyGrace},
		{&opts.WriteTimeout, DefaultWriteTimeout}, {&opts.IdleTimeout, DefaultIdleTimeout}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	// The inner server only registers handlers (with controller-runtime's
	// per-webhook metrics); it is never started.
	inner := crwebhook.NewServer(crwebhook.Options{Host: opts.Host, Port: opts.Port})
	return &Server{Server: inner, uncounted: http.NewServeMux(), opts: opts, evicted: onEvict}
}

// Register puts hook at path. Its requests count in controller-runtime's
// per-webhook metrics (latency, codes, in flight) unless the caller is known
// not to be the API server: with client authentication, one without the API
// server's certificate; without it, one outside the API server's addresses
// once the API server was seen there. Such a caller is answered by the same
// hook, uncounted, so that forged reviews do not move the series dashboards
// and alerts read.
func (s *Server) Register(path string, hook http.Handler) {
	s.Server.Register(path, hook)
	s.uncounted.Handle(path, hook)
}

// RegisterLimited puts hook at path, judged at most width requests at a
// time in a lane of its own: a request waits for it once its body is here
// and before it is decoded, whatever its size, and never takes the heavy
// lane the DaemonSet reviews share. The API server's requests go first,
// the others' take turns by source; one that finds no turn within its
// allowance (laneWaitFor) is refused as busy, which a fail-open entry
// admits. Waiting connections stay evictable at the connection cap, so a
// flood of such reviews holds at most width connections busy. Register it
// before Start.
func (s *Server) RegisterLimited(path string, hook http.Handler, width int) {
	s.Register(path, hook)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limited == nil {
		s.limited = map[string]int{}
	}
	s.limited[path] = max(1, width)
}

// byCaller sends a request to the counted or the uncounted handlers, by
// the caller track recorded.
func (s *Server) byCaller() http.Handler {
	counted := s.WebhookMux()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if callerOf(r.Context(), false).uncounted() != "" {
			s.uncounted.ServeHTTP(w, r)
			return
		}
		counted.ServeHTTP(w, r)
	})
}

// tlsConfig builds the TLS configuration: the options, a certificate
// watcher when no option supplies certificates, and client authentication
// with a client CA bundle reloaded on change (nil without one).
func (s *Server) tlsConfig(ctx context.Context) (*tls.Config, *clientAuth, error) {
	cfg, err := servingTLS(ctx, s.opts.CertDir, s.opts.CertName, s.opts.KeyName, s.opts.TLSOpts)
	if err != nil {
		return nil, nil, err
	}
	if s.opts.ClientCAFile == "" {
		if s.opts.RequireClientCert {
			return nil, nil, errors.New("requiring a client certificate needs a client CA bundle")
		}
		return cfg, nil, nil
	}
	auth, err := newClientAuth(s.opts.ClientCAFile, s.opts.ClientIdentities, s.opts.RequireClientCert, cfg)
	if err != nil {
		return nil, nil, err
	}
	go auth.watch(ctx, clientCAReloadInterval)
	// The listener's configuration hands each handshake the one with the
	// current pool; it also says what the server asks of clients.
	cfg = auth.config.Load().Clone()
	cfg.GetConfigForClient = auth.getConfigForClient
	return cfg, auth, nil
}

// servingTLS is the hardened TLS configuration with the options applied and,
// when no option supplies certificates, a watcher of the certificate files
// (reloaded on change until ctx ends).
func servingTLS(ctx context.Context, certDir, certName, keyName string, opts []func(*tls.Config)) (*tls.Config, error) {
	cfg := &tls.Config{}
	HardenTLS(cfg)
	for _, op := range opts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		w, err := certwatcher.New(filepath.Join(certDir, certName), filepath.Join(certDir, keyName))
		if err != nil {
			return nil, err
		}
		cfg.GetCertificate = w.GetCertificate
		go func() {
			if err := w.Start(ctx); err != nil {
				logf.FromContext(ctx).Error(err, "serving certificate watcher")
			}
		}()
	}
	return cfg, nil
}

// Start implements manager.Runnable: it serves until ctx ends, then lets
// in-flight reviews finish.
func (s *Server) Start(ctx context.Context) error {
	logger := logf.FromContext(ctx).WithName("webhook-server")
	cfg, auth, err := s.tlsConfig(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)))
	if err != nil {
		return err
	}
	guard := newConnGuard(ln, s.opts.MaxConnections, s.evicted)
	guard.auth = auth
	guard.refused = newRefusals(s.opts.Refusals, logger, auth != nil)
	// One heavy lane per process: large bodies and large placements share
	// it, so that together they never take more than GOMAXPROCS-1 cores.
	guard.lane = newHeavyLane(heavyLaneWidth())
	guard.lane.waiting = s.opts.HeavyWaiting
	s.mu.Lock()
	for path, width := range s.limited {
		if guard.own == nil {
			guard.own = map[string]*heavyLane{}
		}
		guard.own[path] = newHeavyLane(width)
	}
	s.mu.Unlock()
	// A large review waits at most half the read deadline for the lane
	// (less when the API server's own timeout is shorter, see laneWaitFor).
	guard.laneWait = s.opts.ReadTimeout / 2
	guard.readTimeout, guard.bodyGrace, guard.minBodyRate = s.opts.ReadTimeout, s.opts.BodyGrace, s.opts.MinBodyRate
	if auth == nil {
		guard.apiServer = s.opts.APIServerAddresses
	}
	guard.bodies = newBodyBudget(max(s.opts.LargeBodyBudget, maxReviewBytes+1), auth != nil || len(guard.apiServer) > 0)
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       guard.connContext,
		ConnState:         guard.connState,
		Handler:           guard.track(s.closeWhenDraining(s.byCaller())),
		MaxHeaderBytes:    64 << 10, // a review's headers are a few hundred bytes
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		ErrorLog:          log.New(&throttledLog{out: os.Stderr, interval: 10 * time.Second}, "", log.LstdFlags),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			logger.Error(err, "shutting down the webhook server")
		}
	}()
	s.mu.Lock()
	s.started, s.addr = true, ln.Addr().String()
	s.mu.Unlock()
	logger.Info("serving webhooks", "address", ln.Addr().String(), "maxConnections", s.opts.MaxConnections,
		"clientAuth", cfg.ClientAuth.String(), "clientIdentities", s.opts.ClientIdentities)
	if err := srv.Serve(tls.NewListener(guard, cfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}

// Drain prepares a shutdown: from now on every answer carries "Connection:
// close", so the API server closes each kept-alive connection cleanly after
// its answer instead of racing a later request against the close at
// shutdown (a review written into a connection the server is closing fails,
// and the API server does not retry it), and DrainingChecker fails. The
// caller stops the server a few seconds later.
func (s *Server) Drain() { s.draining.Store(true) }

// DrainingChecker is a readiness check that fails once Drain was called, so
// a Service stops routing new connections here.
func (s *Server) DrainingChecker(*http.Request) error {
	if s.draining.Load() {
		return errors.New("shutting down: draining connections")
	}
	return nil
}

func (s *Server) closeWhenDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// Addr returns the address the server listens on, "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// StartedChecker is ready once the server listens and accepts a TCP
// connection. It does not complete a TLS handshake, which a server that
// requires client certificates would refuse.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		addr := s.Addr()
		if addr == "" {
			return errors.New("webhook server has not been started yet")
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return c.Close()
	}
}

// caller is who sent a request, decided once, when it arrives
// (connGuard.track), and read by everyone after: the server's counted or
// uncounted handlers, the handlers' decision series, what a verdict may
// name, the lanes' order.
type caller struct {
	peer peer
	// clientAuth: callers can authenticate with a client certificate.
	clientAuth bool
	// unverified: without client authentication, the request came from
	// outside the API server's addresses after the API server was seen
	// calling from them.
	unverified bool
}

// authenticated: a verified client certificate naming an expected identity.
func (c caller) authenticated() bool { return c.peer.trusted && !c.peer.byAddress }

// failedClientAuth: callers can authenticate, and this one did not.
func (c caller) failedClientAuth() bool { return c.clientAuth && !c.authenticated() }

// uncounted is the decision a request counts as instead of its answer, ""
// when its answer counts: a caller that failed client authentication, or
// an unverified one, answered but kept out of the series alerts read.
func (c caller) uncounted() string {
	switch {
	case c.failedClientAuth():
		return "unauthenticated"
	case c.unverified:
		return "unverified"
	}
	return ""
}

// mayLearnNames reports whether an answer may name the cluster's objects
// (the DaemonSets a node change takes away): to the API server, by its
// client certificate or, without client authentication, its address; and,
// without client authentication, to every caller while the API server has
// not been seen at its addresses: dsguard cannot then tell it from anyone
// (where the API server calls from an address its EndpointSlice does not
// list), and withholding the names would withhold them from the person at
// the terminal too. Once it was seen there, other sources are unverified and
// learn counts only.
func (c caller) mayLearnNames() bool {
	return c.peer.trusted || !c.clientAuth && !c.unverified
}

type callerKey struct{}

// withCaller records c as the caller of the request in ctx.
func withCaller(ctx context.Context, c caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerOf is the caller the server recorded in ctx. A request that did
// not come through the server (a handler called directly) is of a caller
// nobody told apart: unauthenticated when clientAuth says callers can
// authenticate, otherwise unknown.
func callerOf(ctx context.Context, clientAuth bool) caller {
	if c, ok := ctx.Value(callerKey{}).(caller); ok {
		return c
	}
	return caller{clientAuth: clientAuth}
}

// peerOf is who sent r: the API server by its client certificate, or,
// without client authentication, by its address.
func (g *connGuard) peerOf(r *http.Request) peer {
	p := peer{key: sourceOf(r.RemoteAddr)}
	switch {
	case g.auth != nil:
		p.trusted = r.TLS != nil && g.auth.identified(*r.TLS)
	case len(g.apiServer) > 0:
		if addr, err := netip.ParseAddr(p.key); err == nil {
			addr = addr.Unmap()
			for _, pre := range g.apiServer {
				if pre.Contains(addr) {
					p.trusted, p.byAddress = true, true
					g.apiServerSeen.Store(true)
					break
				}
			}
		}
	}
	return p
}

// Authenticated reports whether the caller of the request in ctx presented a
// client certificate that verified against the client CA bundle and names an
// expected API server identity. Only then do verdicts name nodes, and only
// then does a request count in the metrics alerts read: any Pod that can
// reach the port could otherwise learn node names or forge those counts.
func Authenticated(ctx context.Context) bool { return callerOf(ctx, false).authenticated() }

// phase is where a connection is in its current request.
type phase int

const (
	phaseReading phase = iota // a request (its body) is arriving
	phaseWaiting              // a whole request waits for the heavy lane
	phaseIdle                 // between requests on a kept-alive connection
	phaseBusy                 // a whole request is being judged
)

// connGuard caps open connections. A connection is evictable unless its
// request is being judged: at the cap, a new connection closes one of the
// source with the most connections, other callers' before the API
// server's, and of those the one stuck longest mid-request, then the one
// waiting longest for the heavy lane, then the longest idle. So a flood of
// connections from one source crowds out that source's own, never the API
// server's, whose requests arrive whole within milliseconds.
type connGuard struct {
	net.Listener
	max     int
	evicted func()
	// auth authenticates the API server; nil: client authentication off.
	auth *clientAuth
	// apiServer are the API server's source addresses, without client
	// authentication (ServerOptions.APIServerAddresses); apiServerSeen is
	// set once a request arrived from one of them.
	apiServer     []netip.Prefix
	apiServerSeen atomic.Bool
	// refused counts and logs refusals; nil: not counted.
	refused *refusals
	// lane is the heavy lane large requests wait for once their body is
	// read, at most laneWait; nil lets every body through at once.
	lane     *heavyLane
	laneWait time.Duration
	// own are the lanes of the paths registered with RegisterLimited,
	// which every request to them takes instead of the heavy lane.
	own map[string]*heavyLane
	// bodies is the budget of bytes for bodies over LargeReviewBytes,
	// reserved as they arrive; nil: none.
	bodies *bodyBudget
	// The pace bodies must arrive at (see ServerOptions), within the
	// request's read deadline (readTimeout; 0: no pace).
	readTimeout, bodyGrace time.Duration
	minBodyRate            int64

	mu      sync.Mutex
	freed   *sync.Cond
	conns   map[*guardedConn]struct{}
	sources map[string]int // open connections per source address
}

type guardedConn struct {
	net.Conn
	g      *connGuard
	once   sync.Once
	source string // the remote address without port
	// Guarded by g.mu.
	trusted  bool      // its last request came from the API server
	phase    phase     // where the current request is
	since    time.Time // when the current phase began
	reqStart time.Time // when the current request's headers were in
}

func newConnGuard(ln net.Listener, max int, evicted func()) *connGuard {
	g := &connGuard{Listener: ln, max: max, evicted: evicted, conns: map[*guardedConn]struct{}{}, sources: map[string]int{}}
	g.freed = sync.NewCond(&g.mu)
	return g
}

// sourceOf is the address of a remote end without its port.
func sourceOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// Accept implements net.Listener.
func (g *connGuard) Accept() (net.Conn, error) {
	c, err := g.Listener.Accept()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	gc := &guardedConn{Conn: c, g: g, source: sourceOf(c.RemoteAddr().String()), since: now, reqStart: now}
	g.mu.Lock()
	for len(g.conns) >= g.max {
		victim := g.victim()
		if victim == nil {
			// Every connection is being judged: judging takes
			// milliseconds, so wait for one to finish.
			g.freed.Wait()
			continue
		}
		g.forget(victim)
		g.mu.Unlock()
		_ = victim.Conn.Close()
		if g.evicted != nil {
			g.evicted()
		}
		g.refused.add(RefusedConnectionEvicted, peer{key: victim.source, trusted: victim.trusted, byAddress: victim.trusted && g.auth == nil})
		g.mu.Lock()
	}
	g.conns[gc] = struct{}{}
	g.sources[gc.source]++
	g.mu.Unlock()
	return gc, nil
}

// victim is the connection to evict at the cap, nil when every one is being
// judged.
func (g *connGuard) victim() *guardedConn {
	var v *guardedConn
	for c := range g.conns {
		if c.phase != phaseBusy && (v == nil || g.evictsBefore(c, v)) {
			v = c
		}
	}
	return v
}

// evictsBefore orders evictable connections: other callers' before the API
// server's, the source with the most connections first, then by phase, then
// the oldest.
func (g *connGuard) evictsBefore(a, b *guardedConn) bool {
	if a.trusted != b.trusted {
		return !a.trusted
	}
	if na, nb := g.sources[a.source], g.sources[b.source]; na != nb {
		return na > nb
	}
	if a.phase != b.phase {
		return a.phase < b.phase
	}
	return a.since.Before(b.since)
}

// forget drops c from the guard's books; the caller holds g.mu.
func (g *connGuard) forget(c *guardedConn) {
	if _, ok := g.conns[c]; !ok {
		return
	}
	delete(g.conns, c)
	if g.sources[c.source]--; g.sources[c.source] <= 0 {
		delete(g.sources, c.source)
	}
}

// Close implements net.Conn: it frees the connection's place.
func (c *guardedConn) Close() error {
	c.once.Do(func() {
		c.g.mu.Lock()
		c.g.forget(c)
		c.g.freed.Signal()
		c.g.mu.Unlock()
	})
	return c.Conn.Close()
}

// arrive starts the pace of a request whose headers are in.
func (g *connGuard) arrive(c *guardedConn) {
	g.mu.Lock()
	c.reqStart = time.Now()
	g.mu.Unlock()
	g.set(c, phaseReading)
}

func (g *connGuard) set(c *guardedConn, p phase) {
	g.mu.Lock()
	c.phase, c.since = p, time.Now()
	if p != phaseBusy {
		g.freed.Signal()
	}
	g.mu.Unlock()
}

// begin records who sent the connection's current request and when it
// began arriving.
func (g *connGuard) begin(c *guardedConn, trusted bool) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	c.trusted = trusted
	return c.reqStart
}

type connKey struct{}

// connContext remembers the connection of each request.
func (g *connGuard) connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*guardedConn); ok {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

// connState starts a new phase when a request begins arriving (Active) and
// when a connection falls idle.
func (g *connGuard) connState(c net.Conn, state http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	gc, ok := c.(*guardedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateActive:
		// A request's headers are in: its body is paced from now. Not
		// from the accept: a client may keep a connection it dialed
		// ahead in its pool for long before the first request on it
		// (the API server's transport does, in every burst of new
		// connections), and that request's body would find its time
		// already spent.
		g.arrive(gc)
	case http.StateIdle:
		g.set(gc, phaseIdle)
	}
}

// maxReviewBytes is controller-runtime's limit on a review's size; a larger
// body is handed on for it to refuse.
const maxReviewBytes = 7 << 20

// track authenticates the caller, reads each request body whole before the
// webhook sees it, at the pace the API server sends one and within the
// caller's share of the large-body budget, lets a large one wait for the
// heavy lane, and marks the connection busy while the request is judged.
// A body that never completes (a slow client cut off, a client that went
// away) ends the request here, quietly: nobody is left to read an answer,
// and controller-runtime would log each one with a stack trace, which a
// flood of them would turn into a flood of logs. Refusals are counted.
func (g *connGuard) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gc, _ := r.Context().Value(connKey{}).(*guardedConn)
		p := g.peerOf(r)
		r = r.WithContext(withCaller(r.Context(), caller{peer: p, clientAuth: g.auth != nil,
			unverified: g.auth == nil && !p.trusted && g.apiServerSeen.Load()}))
		start := time.Now()
		if gc != nil {
			start = g.begin(gc, p.trusted)
		}
		// A large review waits for the lane within one allowance from
		// its start (see laneWaitFor).
		turn := start.Add(g.laneWaitFor(r))
		size := 0
		if r.Body != nil && r.Body != http.NoBody {
			buf := bodyBuffers.Get().(*bytes.Buffer)
			// The body's bytes are only read while the request is
			// served: decoding copies what it keeps.
			defer recycleBody(buf)
			paced := &pacedBody{r: r.Body, start: start, grace: g.bodyGrace, rate: max(g.minBodyRate, 1), budget: g.bodies, p: p}
			if gc != nil && g.readTimeout > 0 {
				paced.conn, paced.hard = gc, start.Add(g.readTimeout)
			}
			defer paced.release()
			body, err := readBody(buf, paced, r.ContentLength)
			paced.done()
			if err != nil {
				// The body stays unread, so the connection cannot carry
				// another request.
				w.Header().Set("Connection", "close")
				var ne net.Error
				switch {
				case errors.Is(err, errBodyBudget):
					g.refused.add(RefusedBodyBudget, p)
					http.Error(w, busyLargeReviews, http.StatusServiceUnavailable)
				case errors.As(err, &ne) && ne.Timeout():
					g.refused.add(RefusedSlowBody, p)
					w.WriteHeader(http.StatusRequestTimeout)
				default:
					w.WriteHeader(http.StatusRequestTimeout)
				}
				return
			}
			size = len(body)
			rest := r.Body
			if len(body) > maxReviewBytes {
				r.Body = readCloser{io.MultiReader(bytes.NewReader(body), rest), rest}
			} else {
				r.Body = &bufferedBody{Reader: bytes.NewReader(body), data: body, Closer: rest}
			}
		}
		lane, own := g.lane, g.own[r.URL.Path]
		if own != nil {
			lane = own
		}
		if lane != nil {
			// The lane is taken only once the body is here: a client that
			// announces a large body and sends it slowly, or never, is
			// cut off, and never holds the lane. An oversized body is left
			// to controller-runtime to refuse.
			use := &laneUse{lane: lane, peer: p, deadline: turn, refused: g.refused}
			if gc != nil {
				use.waiting = func(on bool) {
					if on {
						g.set(gc, phaseWaiting)
					} else {
						g.set(gc, phaseBusy)
					}
				}
			}
			if (own != nil || size > LargeReviewBytes) && size <= maxReviewBytes {
				if gc != nil {
					g.set(gc, phaseWaiting)
				}
				ctx, cancel := context.WithDeadline(r.Context(), turn)
				release, err := lane.acquire(ctx, p)
				cancel()
				if err != nil {
					if r.Context().Err() == nil {
						// Not a client gone (or evicted at the cap).
						reason, answer := laneRefusal(err), busyLargeReviews
						if own != nil {
							reason, answer = RefusedEntryBusy, busyEntry
						}
						g.refused.add(reason, p)
						http.Error(w, answer, http.StatusServiceUnavailable)
					}
					return
				}
				defer release()
				use.held = true
			}
			r = r.WithContext(context.WithValue(r.Context(), laneKey{}, use))
		}
		if gc != nil {
			g.set(gc, phaseBusy)
			defer g.set(gc, phaseReading)
		}
		next.ServeHTTP(w, r)
	})
}

// laneRefusal names a failed wait for the heavy lane.
func laneRefusal(err error) string {
	switch {
	case errors.Is(err, errLaneEvicted):
		return RefusedLaneEvicted
	case errors.Is(err, errLaneFull):
		return RefusedLaneFull
	}
	return RefusedLaneTimeout
}

// busyLargeReviews is the answer to a large review that found no room,
// busyEntry to a review of a RegisterLimited path that found no turn.
const (
	busyLargeReviews = "dsguard is busy with other large reviews; retry later"
	busyEntry        = "dsguard is busy with other reviews of this kind; retry later"
)

// laneWaitFor is how long a large review may wait for room for its body and
// for the heavy lane together: at most laneWait, and at most half the
// timeout the API server gives the call (its ?timeout= parameter), so that a
// review that cannot get a slot is refused as busy while the API server
// still waits for the answer, and one that gets it late still has time to
// be judged.
func (g *connGuard) laneWaitFor(r *http.Request) time.Duration {
	wait := g.laneWait
	if t, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && t > 0 {
		wait = min(wait, t/2)
	}
	return wait
}

// maxBodyPrealloc bounds the buffer reserved for a body from its
// Content-Length before the body arrives: ordinary reviews fit, and a
// client that announces a large body and sends nothing cannot make the
// server reserve much.
const maxBodyPrealloc = 64 << 10

// readBody reads a body up to one byte past maxReviewBytes into buf (its
// earlier content dropped), grown from the body's Content-Length, so that
// an ordinary review is read without growing the buffer again and again.
func readBody(buf *bytes.Buffer, body io.Reader, contentLength int64) ([]byte, error) {
	size := int64(0)
	if contentLength > 0 {
		size = min(contentLength, maxBodyPrealloc)
	}
	// The spare bytes.MinRead let the buffer see the end of the body
	// without growing.
	if need := int(size) + bytes.MinRead; buf.Cap() < need {
		*buf = *bytes.NewBuffer(make([]byte, 0, need))
	}
	buf.Reset()
	_, err := buf.ReadFrom(io.LimitReader(body, maxReviewBytes+1))
	return buf.Bytes(), err
}

// bodyBuffers hold the buffers of ordinary request bodies between
// requests: a review's body was about a sixth of the bytes a review
// allocated, and so of the garbage collector's work per review.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// recycleBody returns buf to bodyBuffers once its request is answered,
// unless a large body grew it: those are rare and would stay pinned.
func recycleBody(buf *bytes.Buffer) {
	if buf.Cap() <= maxBodyPrealloc+bytes.MinRead {
		bodyBuffers.Put(buf)
	}
}

// bufferedBody is a request body track has read whole: HTTPHandler takes
// its bytes instead of copying them again.
type bufferedBody struct {
	*bytes.Reader
	data []byte
	io.Closer
}

// unread returns the whole body while nobody has read from it.
func (b *bufferedBody) unread() ([]byte, bool) {
	return b.data, b.Len() == len(b.data)
}

// throttledLog passes on at most one line per interval and counts the
// rest, so that a flood of failed TLS handshakes (the HTTP server logs each
// one) costs one line every few seconds.
type throttledLog struct {
	out      io.Writer
	interval time.Duration

	mu      sync.Mutex
	last    time.Time
	dropped int
}

func (l *throttledLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.last) < l.interval {
		l.dropped++
		return len(p), nil
	}
	l.last = now
	if l.dropped > 0 {
		fmt.Fprintf(l.out, "webhook server: %d similar messages suppressed\n", l.dropped)
		l.dropped = 0
	}
	return l.out.Write(p)
}

var _ crwebhook.Server = &Server{}

// AEADCipherSuites are the TLS 1.2 suites dsguard accepts: ECDHE key
// exchange with AES-GCM or ChaCha20-Poly1305. The CBC suites Go still enables
// by default (with SHA-1 MACs) are left out. TLS 1.3 suites are all AEAD and
// not configurable.
var AEADCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// HardenTLS sets TLS 1.2 as the minimum, the AEAD suites only, and HTTP/1.1
// (HTTP/2 brings its rapid-reset class of attacks, and the API server speaks
// HTTP/1.1 to webhooks anyway).
func HardenTLS(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.CipherSuites = AEADCipherSuites
	c.NextProtos = []string{"http/1.1"}
}
