package webhook

import (
	"errors"
	"io"
	"sync"
	"time"
)

// Defaults of the pace a body must arrive at: the API server writes a review
// whole, at once, so on any cluster network its body arrives within
// milliseconds. A client that announces a body and sends it slowly, or not
// at all, is cut off long before the read deadline.
const (
	DefaultBodyGrace   = 2 * time.Second
	DefaultMinBodyRate = 1 << 20 // bytes per second
)

// bodyBudget bounds the bytes of bodies over LargeReviewBytes held in memory
// at once. Bytes are reserved as they arrive, not by the announced size: a
// client that announces a large body and sends nothing holds nothing. When
// the API server can be told apart (client authentication, or without it
// its source addresses), it has three quarters of the budget to itself and
// the other callers share the rest; each source other
// than the API server may hold at most half of what its kind may hold, so
// that no one source takes all of it.
type bodyBudget struct {
	mu                    sync.Mutex
	trustedCap, othersCap int64
	peerCap               int64
	trusted, others       int64
	peers                 map[string]int64
}

func newBodyBudget(total int64, reserve bool) *bodyBudget {
	b := &bodyBudget{othersCap: total, peers: map[string]int64{}}
	if reserve {
		b.trustedCap = total * 3 / 4
		b.othersCap = total - b.trustedCap
	}
	b.peerCap = b.othersCap / 2
	return b
}

// take reserves n bytes for p; false when p's share has no room.
func (b *bodyBudget) take(p peer, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.trusted {
		if b.trusted+n > b.trustedCap {
			return false
		}
		b.trusted += n
		return true
	}
	if b.others+n > b.othersCap || b.peers[p.key]+n > b.peerCap {
		return false
	}
	b.others += n
	b.peers[p.key] += n
	return true
}

// give returns n bytes of p's.
func (b *bodyBudget) give(p peer, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.trusted {
		b.trusted -= n
		return
	}
	b.others -= n
	if b.peers[p.key] -= n; b.peers[p.key] <= 0 {
		delete(b.peers, p.key)
	}
}

// errBodyBudget: a body found no room in its caller's share of the budget.
var errBodyBudget = errors.New("no room for another large review body")

// pacedBody reads a request body at the pace the API server sends one: by
// each read, at least rate bytes per second after grace must have arrived
// (the connection's read deadline says so, within the request's own
// deadline), and bytes past LargeReviewBytes are reserved in the budget as
// they arrive. reserved is what release must give back.
type pacedBody struct {
	r        io.Reader
	conn     *guardedConn // nil: no deadlines
	start    time.Time
	grace    time.Duration
	rate     int64
	hard     time.Time // the request's read deadline
	budget   *bodyBudget
	p        peer
	read     int64
	reserved int64
}

func (b *pacedBody) Read(buf []byte) (int, error) {
	if b.conn != nil {
		due := b.start.Add(b.grace + time.Duration((b.read+int64(len(buf)))*int64(time.Second)/b.rate))
		if !b.hard.IsZero() && due.After(b.hard) {
			due = b.hard
		}
		_ = b.conn.SetReadDeadline(due)
	}
	n, err := b.r.Read(buf)
	b.read += int64(n)
	if over := b.read - LargeReviewBytes - b.reserved; over > 0 && b.budget != nil {
		if !b.budget.take(b.p, over) {
			return n, errBodyBudget
		}
		b.reserved += over
	}
	return n, err
}

// done restores the request's own read deadline, which net/http's read
// after the body (that notices a client going away) runs under.
func (b *pacedBody) done() {
	if b.conn != nil {
		_ = b.conn.SetReadDeadline(b.hard)
	}
}

// release gives back the reserved bytes once the body is no longer held.
func (b *pacedBody) release() {
	if b.budget != nil {
		b.budget.give(b.p, b.reserved)
	}
	b.reserved = 0
}
