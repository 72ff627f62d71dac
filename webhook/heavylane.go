package webhook

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HeavyWork is the prediction work (requirements × node decisions) above
// which an evaluation takes the heavy lane. Ordinary DaemonSets cost a few
// hundred units; the most a placement may cost is policy.MaxPredictionWork.
const HeavyWork = 20_000

// DefaultLaneWaiters bounds the requests waiting for the heavy lane at once.
// At one slot and about 100 ms a worst-case placement that is a few seconds
// of queue, longer than any request may wait for its turn (see laneWaitFor).
const DefaultLaneWaiters = 32

// heavyLaneWidth leaves at least one core to ordinary requests.
func heavyLaneWidth() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// Errors of heavyLane.acquire besides the context's own.
var (
	// errLaneEvicted: the waiter was dropped to make room for another
	// caller's request (see heavyLane.acquire).
	errLaneEvicted = errors.New("dsguard dropped this request from the queue for large reviews to make room for another caller's")
	// errLaneFull: every waiting place is held by the API server's own
	// requests, and this caller is not the API server.
	errLaneFull = errors.New("dsguard's queue for large reviews is full")
)

// peer is who sends a request, as far as the lanes and budgets care: the
// API server (a verified client certificate with an expected identity), or
// another source, told apart by address. An unauthenticated caller cannot
// take what is set aside for the API server, and one source cannot take
// every place from the others.
type peer struct {
	key     string // the source address; "" when unknown
	trusted bool   // the API server: authenticated, or by its address (byAddress)
	// byAddress: trusted for its source address, without client
	// authentication (ServerOptions.APIServerAddresses).
	byAddress bool
}

// heavyLane bounds how many large evaluations run at once. A worst-case
// placement costs up to about 100 ms of CPU; eight clients sending them in
// a loop (dry-runs are free for them) would otherwise occupy every core, and
// a compliant DaemonSet's review would wait behind them.
//
// Its queue is fair rather than first come, first served: the API server's
// requests go first, the others take turns by source, so that a flood from
// one Pod delays that Pod's own requests, not the API server's nor another
// source's. The queue is bounded: when it is full, the oldest waiter of the
// source with the most waiters makes room (never one of the API server's for
// another caller), so that a newcomer is not refused because one source
// filled the queue first.
type heavyLane struct {
	width, maxWaiting int
	waiting           prometheus.Gauge // may be nil

	mu      sync.Mutex
	inUse   int
	queued  int
	pushed  int                      // waiters ever queued
	trusted []*laneWaiter            // the API server's waiters, oldest first
	others  map[string][]*laneWaiter // every other source's, oldest first
	turns   []string                 // sources with waiters, next turn first
}

// laneWaiter is one request waiting for a slot. ready is closed when it is
// granted one (granted) or dropped (evicted); both are set under the lane's
// lock.
type laneWaiter struct {
	p       peer
	ready   chan struct{}
	granted bool
	evicted bool
}

func newHeavyLane(width int) *heavyLane {
	return &heavyLane{width: max(1, width), maxWaiting: DefaultLaneWaiters, others: map[string][]*laneWaiter{}}
}

// enter waits for a slot when work is heavy and returns the function that
// frees it; light work passes at once. It gives up when ctx ends.
func (l *heavyLane) enter(ctx context.Context, p peer, work int) (func(), error) {
	if l == nil || work <= HeavyWork {
		return func() {}, nil
	}
	return l.acquire(ctx, p)
}

// acquire waits for a slot for a request of p and returns the function that
// frees it. It gives up when ctx ends, and fails with errLaneEvicted or
// errLaneFull as the lane type says.
func (l *heavyLane) acquire(ctx context.Context, p peer) (func(), error) {
	l.mu.Lock()
	if l.inUse < l.width && l.queued == 0 {
		l.inUse++
		l.mu.Unlock()
		return l.release, nil
	}
	if l.queued >= l.maxWaiting && !l.makeRoom(p) {
		l.mu.Unlock()
		return nil, errLaneFull
	}
	w := &laneWaiter{p: p, ready: make(chan struct{})}
	l.push(w)
	l.mu.Unlock()
	if l.waiting != nil {
		l.waiting.Inc()
		defer l.waiting.Dec()
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
		l.mu.Lock()
		switch {
		case w.granted:
			// Granted as the context ended: pass the slot on.
			l.inUse--
			l.grant()
		case !w.evicted:
			l.remove(w)
		}
		l.mu.Unlock()
		return nil, ctx.Err()
	}
	if w.evicted {
		return nil, errLaneEvicted
	}
	return l.release, nil
}

func (l *heavyLane) release() {
	l.mu.Lock()
	l.inUse--
	l.grant()
	l.mu.Unlock()
}

func (l *heavyLane) push(w *laneWaiter) {
	l.queued++
	l.pushed++
	if w.p.trusted {
		l.trusted = append(l.trusted, w)
		return
	}
	q := l.others[w.p.key]
	if len(q) == 0 {
		l.turns = append(l.turns, w.p.key)
	}
	l.others[w.p.key] = append(q, w)
}

// remove takes w out of the queue.
func (l *heavyLane) remove(w *laneWaiter) {
	if w.p.trusted {
		l.trusted = deleteWaiter(l.trusted, w)
	} else {
		l.setQueue(w.p.key, deleteWaiter(l.others[w.p.key], w))
	}
	l.queued--
}

func deleteWaiter(q []*laneWaiter, w *laneWaiter) []*laneWaiter {
	for i, x := range q {
		if x == w {
			return append(q[:i:i], q[i+1:]...)
		}
	}
	return q
}

// setQueue stores a source's queue, dropping the source from the turns when
// it has no waiters left.
func (l *heavyLane) setQueue(key string, q []*laneWaiter) {
	if len(q) > 0 {
		l.others[key] = q
		return
	}
	delete(l.others, key)
	for i, k := range l.turns {
		if k == key {
			l.turns = append(l.turns[:i:i], l.turns[i+1:]...)
			break
		}
	}
}

// makeRoom drops one waiter so that a request of p can queue: the oldest
// of the source with the most waiters (p's own when it has as many as any),
// or, for the API server, its own oldest when it holds every place. It
// reports false when p is not the API server and the API server holds every
// place.
func (l *heavyLane) makeRoom(p peer) bool {
	victim := ""
	most := 0
	if !p.trusted {
		// The newcomer counts for its own source.
		victim, most = p.key, len(l.others[p.key])+1
	}
	for _, k := range l.turns {
		if n := len(l.others[k]); n > most {
			victim, most = k, n
		}
	}
	var w *laneWaiter
	switch q := l.others[victim]; {
	case len(q) > 0:
		w = q[0]
		l.setQueue(victim, q[1:])
	case p.trusted && len(l.trusted) > 0:
		w = l.trusted[0]
		l.trusted = l.trusted[1:]
	default:
		return false
	}
	l.queued--
	w.evicted = true
	close(w.ready)
	return true
}

// grant hands free slots to waiters: the API server's first, then one per
// source in turn.
func (l *heavyLane) grant() {
	for l.inUse < l.width && l.queued > 0 {
		var w *laneWaiter
		if len(l.trusted) > 0 {
			w = l.trusted[0]
			l.trusted = l.trusted[1:]
		} else {
			key := l.turns[0]
			q := l.others[key]
			w = q[0]
			l.setQueue(key, q[1:])
			if len(q) > 1 {
				// Its next waiter goes to the back of the turns.
				l.turns = append(l.turns[1:], key)
			}
		}
		l.queued--
		l.inUse++
		w.granted = true
		close(w.ready)
	}
}

// LargeReviewBytes is the request size above which a review takes the heavy
// lane once its body has arrived, before it is decoded. Decoding is most of
// the cost of a large review (a 1.5 MB one takes tens of milliseconds of CPU
// before any rule runs), so a flood of them must queue before decoding, not
// after. An ordinary DaemonSet review, old object and managed fields
// included, is tens of kilobytes.
const LargeReviewBytes = 256 << 10

type laneKey struct{}

// laneUse tells the handler which heavy lane the server shares with it,
// whether this request already holds a slot (taken for its large body), who
// sent it, until when it may wait for a slot, and how to mark its
// connection as waiting meanwhile (evictable at the connection cap).
type laneUse struct {
	lane     *heavyLane
	held     bool
	peer     peer
	deadline time.Time
	waiting  func(bool) // may be nil
	refused  *refusals  // may be nil
}

// laneFor returns the lane a handler's heavy evaluation should enter, the
// caller and the context to wait in: the server's lane, unless the request
// already holds one of its slots (nil then, which enter passes at once), or
// fallback outside such a server.
func laneFor(ctx context.Context, fallback *heavyLane) (*heavyLane, *laneUse) {
	use, ok := ctx.Value(laneKey{}).(*laneUse)
	switch {
	case !ok:
		return fallback, nil
	case use.held:
		return nil, use
	default:
		return use.lane, use
	}
}

// enterLane lets a heavy evaluation of work wait for its lane, within the
// request's allowance, with its connection marked as waiting meanwhile. A
// wait that fails while the request is still wanted is a refusal: counted
// and logged by the server's refusals, or in metric outside a server
// (clientAuth says how to name the caller there).
func enterLane(ctx context.Context, fallback *heavyLane, work int, metric *prometheus.CounterVec, clientAuth bool) (func(), error) {
	lane, use := laneFor(ctx, fallback)
	if lane == nil || work <= HeavyWork {
		return func() {}, nil
	}
	release, err := waitInLane(ctx, lane, use)
	if err != nil && ctx.Err() == nil {
		p := callerOf(ctx, clientAuth).peer
		refused := &refusals{metric: metric, clientAuth: clientAuth, interval: time.Hour, last: map[string]time.Time{}, hush: map[string]int{}}
		if use != nil {
			p, refused = use.peer, use.refused
		}
		if refused != nil {
			refused.add(laneRefusal(err), p)
		}
	}
	return release, err
}

func waitInLane(ctx context.Context, lane *heavyLane, use *laneUse) (func(), error) {
	p := callerOf(ctx, false).peer
	if use != nil {
		p = use.peer
		if !use.deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, use.deadline)
			defer cancel()
		}
		if use.waiting != nil {
			use.waiting(true)
			defer use.waiting(false)
		}
	}
	return lane.acquire(ctx, p)
}
