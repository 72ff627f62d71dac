package clusterview

import "github.com/prometheus/client_golang/prometheus"

// PolicyMetrics follow the loads of the policy. Labels are bounded: a fixed
// set of results.
type PolicyMetrics struct {
	PolicyReloads    *prometheus.CounterVec
	PolicyGeneration prometheus.Gauge
	PolicyDegraded   prometheus.Gauge
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
			Help: "1 while the policy ConfigMap is invalid and an earlier policy (or the built-in defaults) is served.",
		}),
	}
	reg.MustRegister(m.PolicyReloads, m.PolicyGeneration, m.PolicyDegraded)
	return m
}
