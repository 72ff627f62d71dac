package clusterview

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dsguard/dsguard/policy"
)

// PolicyMetrics follow the loads of the policy. Labels are bounded: a fixed
// set of results.
type PolicyMetrics struct {
	PolicyReloads    *prometheus.CounterVec
	PolicyGeneration prometheus.Gauge
	PolicyDegraded   prometheus.Gauge
	// PolicyWeakened is 1 per way the active policy is weaker than the
	// built-in baseline (policy.WeaknessReasons), 0 otherwise.
	PolicyWeakened *prometheus.GaugeVec
	// PolicyWeakenings counts the changes that lowered enforcement, by
	// reason (policy.WeakeningReasons), each time a loaded policy weakened
	// the one loaded before it.
	PolicyWeakenings *prometheus.CounterVec
}

// NewPolicyMetrics creates the collectors and registers them with reg.
func NewPolicyMetrics(reg prometheus.Registerer) *PolicyMetrics {
	m := &PolicyMetrics{
		PolicyReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dsguard_policy_reloads_total",
			Help: "Policy loads by result (success, invalid, defaults).",
		}, []string{"result"}),
		PolicyGeneration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dsguard_policy_generation",
			Help: "Generation of the active policy; increases with every successful load.",
		}),
		PolicyDegraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dsguard_policy_degraded",
			Help: "1 while the policy ConfigMap is invalid or deleted and an earlier policy (or the built-in defaults) is served.",
		}),
		PolicyWeakened: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dsguard_policy_weakened",
			Help: "1 for each way the active policy is weaker than the built-in baseline: enforcement, bypass-broad-group, bypass-anonymous, deny-rule-lowered, namespace-lowered, exemptions-unbounded, rule-scoped-away, rule-parameters-voided.",
		}, []string{"reason"}),
		PolicyWeakenings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dsguard_policy_weakenings_total",
			Help: "Changes that lowered enforcement against the policy loaded before, by reason: " + strings.Join(policy.WeakeningReasons, ", ") + ".",
		}, []string{"reason"}),
	}
	for _, r := range policy.WeaknessReasons {
		m.PolicyWeakened.WithLabelValues(r).Set(0)
	}
	for _, r := range policy.WeakeningReasons {
		m.PolicyWeakenings.WithLabelValues(r)
	}
	reg.MustRegister(m.PolicyReloads, m.PolicyGeneration, m.PolicyDegraded, m.PolicyWeakened, m.PolicyWeakenings)
	return m
}
