package clusterview

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// PolicySource holds the active policy. Readers take it lock-free on every
// request; loads parse and validate first and swap only a good policy, so an
// invalid document never replaces the last good one.
type PolicySource struct {
	active  atomic.Pointer[ActivePolicy]
	metrics *PolicyMetrics

	mu sync.Mutex // serialises loads so generations increase in order
	// changed is closed when the active policy changes (under mu); nil
	// until Changed asks for it.
	changed chan struct{}
	// degraded is read lock-free on every request (its warning goes on
	// every response); written under mu.
	degraded atomic.Pointer[degradation]

	// Adjust, when set, changes every policy document before it is
	// compiled, e.g. turns off the rules that ValidatingAdmissionPolicies
	// enforce instead. Set it before the first load.
	Adjust func(*policy.Config)
}

// ActivePolicy is a loaded policy with where it came from.
type ActivePolicy struct {
	Policy     *policy.Policy
	Generation int64
	// Origin says where the policy came from, for logs and Events.
	Origin string
	// document is what Policy was compiled from, nil for the defaults:
	// Refresh compiles it again.
	document []byte
}

// NewPolicySource returns a source with no policy loaded yet; it is not ready
// until the first Load or UseDefaults.
func NewPolicySource(m *PolicyMetrics) *PolicySource {
	return &PolicySource{metrics: m}
}

// Current returns the active policy, or nil before the first load.
func (s *PolicySource) Current() *ActivePolicy { return s.active.Load() }

// Changed returns a channel closed when the active policy next changes. A
// caller reads Current after Changed, so that a change between the two
// closes the channel it holds.
func (s *PolicySource) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// Load parses and validates data and, when it is good, makes it the active
// policy; when it is bad, see Reject.
func (s *PolicySource) Load(data []byte, origin string) error {
	p, err := s.Parse(data)
	if err != nil {
		s.Reject(err, origin)
		return err
	}
	s.Activate(p, data, origin)
	return nil
}

// Parse decodes, validates and compiles data as Load does, Adjust included,
// without making it active: a caller that has a fallback to try before the
// built-in defaults (see Reject) checks first, then activates.
func (s *PolicySource) Parse(data []byte) (*policy.Policy, error) {
	cfg, err := rules.Builtin().ParseConfig(data)
	if err != nil {
		return nil, err
	}
	return s.compile(cfg)
}

// Activate makes p, the policy Parse made of data, the active one and
// clears Degraded.
func (s *PolicySource) Activate(p *policy.Policy, data []byte, origin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setDegraded(nil)
	s.count("success")
	s.swap(p, data, origin)
}

// Reject records that the policy from origin cannot be used. The active
// policy stays; if there is none yet, the built-in defaults become active: a
// broken ConfigMap at start-up degrades dsguard, it does not take it down.
func (s *PolicySource) Reject(err error, origin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setDegraded(err)
	s.count("invalid")
	if s.active.Load() == nil {
		s.swap(s.defaults(), nil, "built-in defaults ("+origin+" is invalid)")
	}
}

// UseDefaults makes the built-in policy active and clears Degraded: for
// callers to whom the defaults are the intended policy (tests, an embedding
// without a ConfigMap). dsguard serve uses UseDefaultsDegraded.
func (s *PolicySource) UseDefaults(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setDegraded(nil)
	s.count("defaults")
	s.swap(s.defaults(), nil, "built-in defaults ("+reason+")")
}

// UseDefaultsDegraded makes the built-in policy active and reports Degraded
// by cause: there is neither a usable ConfigMap nor a last good policy (a
// first install without a ConfigMap). dsguard then enforces what it ships
// with rather than refusing readiness, which with failurePolicy Fail would
// block every DaemonSet write in the cluster, and says so on every response.
func (s *PolicySource) UseDefaultsDegraded(cause error, origin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setDegraded(cause)
	s.count("defaults")
	s.swap(s.defaults(), nil, origin)
}

func (s *PolicySource) compile(cfg *policy.Config) (*policy.Policy, error) {
	if s.Adjust != nil {
		s.Adjust(cfg)
	}
	return policy.Compile(cfg)
}

// defaults returns the built-in policy, adjusted.
func (s *PolicySource) defaults() *policy.Policy {
	if s.Adjust == nil {
		return rules.Builtin().Default()
	}
	p, err := s.compile(rules.Builtin().DefaultConfig())
	if err != nil {
		// Adjust only lowers actions; the defaults always compile.
		return rules.Builtin().Default()
	}
	return p
}

// degradation is why the active policy is not the one in the ConfigMap.
type degradation struct{ err error }

// Degraded returns the error that keeps the intended policy from loading, or nil.
func (s *PolicySource) Degraded() error {
	if d := s.degraded.Load(); d != nil {
		return d.err
	}
	return nil
}

// ReadyCheck is a healthz checker: ready once a policy is active.
func (s *PolicySource) ReadyCheck(_ *http.Request) error {
	if s.active.Load() == nil {
		return errors.New("no policy loaded yet")
	}
	return nil
}

// Refresh compiles the active policy's document again, e.g. after what
// Adjust decides has changed (in vap+webhook mode, which rules the API
// server is known to enforce). Degraded and the origin stay as they are.
func (s *PolicySource) Refresh() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.active.Load()
	if cur == nil {
		return nil
	}
	p := s.defaults()
	if cur.document != nil {
		var err error
		if p, err = s.Parse(cur.document); err != nil {
			return err // it compiled before; keep what is active
		}
	}
	s.swap(p, cur.document, cur.Origin)
	return nil
}

// swap makes p active; data is its document, nil for the built-in defaults.
func (s *PolicySource) swap(p *policy.Policy, data []byte, origin string) {
	gen := int64(1)
	if old := s.active.Load(); old != nil {
		gen = old.Generation + 1
	}
	s.active.Store(&ActivePolicy{Policy: p, Generation: gen, Origin: origin, document: data})
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	if s.metrics != nil {
		s.metrics.PolicyGeneration.Set(float64(gen))
		weak := map[string]bool{}
		for _, w := range p.Weaknesses() {
			weak[w.Reason] = true
		}
		for _, r := range policy.WeaknessReasons {
			v := 0.0
			if weak[r] {
				v = 1
			}
			s.metrics.PolicyWeakened.WithLabelValues(r).Set(v)
		}
	}
}

// CountWeakenings counts each change that lowered enforcement against the
// policy loaded before.
func (s *PolicySource) CountWeakenings(ws []policy.Weakness) {
	if s.metrics == nil {
		return
	}
	for _, w := range ws {
		s.metrics.PolicyWeakenings.WithLabelValues(w.Reason).Inc()
	}
}

// LoadLastGood makes the policy recorded as the last good one active when
// data parses, and keeps the source degraded by cause (the reason the
// intended policy could not be used): a replica that starts while the
// ConfigMap is broken serves what the others serve, not the defaults.
func (s *PolicySource) LoadLastGood(data []byte, origin string, cause error) error {
	p, err := s.Parse(data)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setDegraded(cause)
	s.count("last-good")
	s.swap(p, data, origin)
	return nil
}

// KeepDegraded records that the intended policy is gone (its ConfigMap was
// deleted) while the active policy stays in force.
func (s *PolicySource) KeepDegraded(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setDegraded(cause)
}

func (s *PolicySource) setDegraded(err error) {
	if err == nil {
		s.degraded.Store(nil)
	} else {
		s.degraded.Store(&degradation{err})
	}
	if s.metrics != nil {
		v := 0.0
		if err != nil {
			v = 1
		}
		s.metrics.PolicyDegraded.Set(v)
	}
}

func (s *PolicySource) count(result string) {
	if s.metrics != nil {
		s.metrics.PolicyReloads.WithLabelValues(result).Inc()
	}
}
