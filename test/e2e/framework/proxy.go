package framework

import (
	"errors"
	"net"
	"sync"
)

// Proxy is a TCP relay to a fixed address (the API server, or a set of
// dsguard replicas through a Balancer) that a test can cut and restore. A cut
// behaves like a network partition, not like a crashed server: bytes stop
// flowing both ways on open connections and new connections are accepted but
// not connected, so clients see timeouts rather than refusals. Restore lets
// the held bytes and connections through, as TCP does after a short
// partition; a client that gave up meanwhile has closed its side.
type Proxy struct {
	// Addr is the host:port clients dial.
	Addr string

	l    net.Listener
	dial func() (net.Conn, error)

	mu     sync.Mutex
	cond   *sync.Cond
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
}

// NewProxy starts a proxy on a free 127.0.0.1 port that relays to target.
func NewProxy(target string) (*Proxy, error) {
	return newProxy(func() (net.Conn, error) { return net.Dial("tcp", target) })
}

func newProxy(dial func() (net.Conn, error)) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: l.Addr().String(), l: l, dial: dial, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	return p, nil
}

// Cut stops all traffic through the proxy until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// Restore lets traffic flow again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close stops listening and closes every relayed connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	_ = p.l.Close()
}

// open waits while the proxy is cut; it reports false once the proxy is closed.
func (p *Proxy) open() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.cut && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) serve() {
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.relay(client)
	}
}

func (p *Proxy) relay(client net.Conn) {
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	if !p.open() {
		return
	}
	server, err := p.dial()
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.copy(server, client); done <- struct{}{} }()
	go func() { p.copy(client, server); done <- struct{}{} }()
	// When one side ends, end both: the deferred closes unblock the other copy.
	<-done
}

// copy relays src to dst, holding each chunk while the proxy is cut.
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.open() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Balancer spreads new connections round-robin over its backends, as a
// Service does over its ready endpoints. A removed backend gets no new
// connections; the ones it holds stay until either side closes them, as with
// a Service whose endpoint goes away (conntrack keeps them).
type Balancer struct {
	*Proxy

	mu       sync.Mutex
	backends []string
	next     int
}

// NewBalancer starts a balancer on a free 127.0.0.1 port with no backends:
// until Add, connections are accepted and closed.
func NewBalancer() (*Balancer, error) {
	b := &Balancer{}
	p, err := newProxy(b.pick)
	if err != nil {
		return nil, err
	}
	b.Proxy = p
	return b, nil
}

// Add makes addr a backend.
func (b *Balancer) Add(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = append(b.backends, addr)
}

// Remove stops sending new connections to addr.
func (b *Balancer) Remove(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, a := range b.backends {
		if a == addr {
			b.backends = append(b.backends[:i], b.backends[i+1:]...)
			return
		}
	}
}

func (b *Balancer) pick() (net.Conn, error) {
	b.mu.Lock()
	if len(b.backends) == 0 {
		b.mu.Unlock()
		return nil, errNoBackend
	}
	addr := b.backends[b.next%len(b.backends)]
	b.next++
	b.mu.Unlock()
	return net.Dial("tcp", addr)
}

var errNoBackend = errors.New("no backend")
