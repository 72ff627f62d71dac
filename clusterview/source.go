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

	mu       sync.Mutex // serialises loads so generations increase in order
	degraded error

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
}

// NewPolicySource returns a source with no policy loaded yet; it is not ready
// until the first Load or UseDefaults.
func NewPolicySource(m *PolicyMetrics) *PolicySource {
	return &PolicySource{metrics: m}
}

// Current returns the active policy, or nil before the first load.
func (s *PolicySource) Current() *ActivePolicy { return s.active.Load() }

// Load parses and validates data and, when it is good, makes it the active
// policy; when it is bad, see Reject.
func (s *PolicySource) Load(data []byte, origin string) error {
	p, err := s.Parse(data)
	if err != nil {
		s.Reject(err, origin)
		return err
	}
	s.Activate(p, origin)
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

// Activate makes p, a policy from Parse, the active one and clears Degraded.
func (s *PolicySource) Activate(p *policy.Policy, origin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setDegraded(nil)
	s.count("success")
	s.swap(p, origin)
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
		s.swap(s.defaults(), "built-in defaults ("+origin+" is invalid)")
	}
}

// UseDefaults makes the built-in policy active, e.g. when no ConfigMap exists.
func (s *PolicySource) UseDefaults(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setDegraded(nil)
	s.count("defaults")
	s.swap(s.defaults(), "built-in defaults ("+reason+")")
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

// Degraded returns the error that keeps the intended policy from loading, or nil.
func (s *PolicySource) Degraded() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.degraded
}

// ReadyCheck is a healthz checker: ready once a policy is active.
func (s *PolicySource) ReadyCheck(_ *http.Request) error {
	if s.active.Load() == nil {
		return errors.New("no policy loaded yet")
	}
	return nil
}

func (s *PolicySource) swap(p *policy.Policy, origin string) {
	gen := int64(1)
	if old := s.active.Load(); old != nil {
		gen = old.Generation + 1
	}
	s.active.Store(&ActivePolicy{Policy: p, Generation: gen, Origin: origin})
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
	s.swap(p, origin)
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
	s.degraded = err
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
