//go:build !offline

package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	dswebhook "github.com/dsguard/dsguard/webhook"
)

// namedCheck is one readiness check.
type namedCheck struct {
	name  string
	check healthz.Checker
}

// probeHandler serves /healthz (liveness: the process answers) and /readyz
// with its checks, each also at /readyz/<name>, as controller-runtime's probe
// server does.
func probeHandler(readiness []namedCheck) http.Handler {
	ready := healthz.Handler{Checks: map[string]healthz.Checker{}}
	for _, c := range readiness {
		ready.Checks[c.name] = c.check
	}
	live := healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	mux := http.NewServeMux()
	for path, h := range map[string]http.Handler{"/readyz": &ready, "/healthz": &live} {
		mux.Handle(path, http.StripPrefix(path, h))
		mux.Handle(path+"/", http.StripPrefix(path, h))
	}
	return mux
}

// probeEvictions counts connections to the health port closed at its cap.
var probeEvictions = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "dsguard_health_connections_evicted_total",
	Help: "Connections to the health probe port closed at its connection cap (--health-probe-max-connections): a client holding connections open there.",
})

// addHealthChecks serves /healthz and the readiness checks on
// --health-probe-bind-address, behind a connection cap
// (dswebhook.NewProbeServer): dsguard is ready once it has a policy, knows
// the nodes, serves webhooks and, when it manages its certificate, serves
// one the caBundle trusts.
func (o *serveOptions) addHealthChecks(mgr ctrl.Manager, readiness []namedCheck) error {
	if o.probeAddr == "0" || o.probeAddr == "" {
		return nil
	}
	srv, err := dswebhook.NewProbeServer(dswebhook.ProbeServerOptions{
		Addr: o.probeAddr, Handler: probeHandler(readiness),
		MaxConnections: o.probeMaxConns, OnEvict: probeEvictions.Inc,
	})
	if err != nil {
		return err
	}
	metrics.Registry.MustRegister(probeEvictions)
	return mgr.Add(srv)
}
