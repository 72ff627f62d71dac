package chart

import (
	"slices"
	"testing"
)

// TestTemplate_PassThrough: what operators tune without forking the chart
// reaches the objects: extra serve arguments after the chart's own, extra
// environment, labels on every object, and the first-class serve values.
func TestTemplate_PassThrough(t *testing.T) {
	e := setup(t)
	for _, h := range e.helms() {
		t.Run(h.name, func(t *testing.T) {
			objs := objects(t, e.template(t, h,
				"--set", "extraArgs[0]=--api-compression=true",
				"--set", "extraEnv[0].name=GODEBUG", "--set", "extraEnv[0].value=http2client=0",
				"--set", "commonLabels.team=platform",
				"--set", "audit.interval=1m", "--set", "audit.gapWindow=10m", "--set", "leaderElection.leaseDuration=30s",
				"--set", "leaderElection.renewDeadline=20s", "--set", "leaderElection.retryPeriod=5s", "--set", "nodeView.stalenessBound=5m", "--set", "fit.enabled=false",
				"--set", "webhook.maxConnections=512", "--set", "webhook.requestReadTimeout=15s", "--set", "metrics.maxConnections=8",
				"--set", "metrics.serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true",
				"--set-string", `webhook.annotations.admissions\.enforcer/disabled=true`))
			vwc := find(objs, "ValidatingWebhookConfiguration")
			if len(vwc) != 1 || get(vwc[0], "metadata", "annotations", "admissions.enforcer/disabled") != "true" {
				t.Errorf("webhook.annotations did not reach the ValidatingWebhookConfiguration: %v", vwc)
			}
			for _, o := range objs {
				if get(o, "metadata", "labels", "team") != "platform" {
					t.Errorf("%s %s lacks the common label team=platform", o["kind"], get(o, "metadata", "name"))
				}
			}
			deploy := find(objs, "Deployment")
			if len(deploy) != 1 {
				t.Fatalf("%d Deployments", len(deploy))
			}
			container := get(deploy[0], "spec", "template", "spec", "containers", 0)
			args, _ := get(container, "args").([]any)
			for _, want := range []string{"--audit-interval=1m", "--gap-window=10m", "--audit-lease-duration=30s",
				"--audit-lease-renew-deadline=20s", "--audit-lease-retry-period=5s", "--node-staleness-bound=5m", "--fit=false",
				"--max-connections=512", "--request-read-timeout=15s", "--metrics-max-connections=8"} {
				if !slices.Contains(args, any(want)) {
					t.Errorf("args lack %s: %v", want, args)
				}
			}
			if len(args) == 0 || args[len(args)-1] != "--api-compression=true" {
				t.Errorf("extraArgs must come last (a repeated flag takes the last value): %v", args)
			}
			env, _ := get(container, "env").([]any)
			if len(env) == 0 || get(env[len(env)-1], "name") != "GODEBUG" || get(env[len(env)-1], "value") != "http2client=0" {
				t.Errorf("extraEnv missing from the container's env: %v", env)
			}
			sm := find(objs, "ServiceMonitor")
			if len(sm) != 1 {
				t.Fatalf("%d ServiceMonitors", len(sm))
			}
			ep := get(sm[0], "spec", "endpoints", 0)
			if get(ep, "honorLabels") != true || get(ep, "bearerTokenFile") != nil ||
				get(ep, "authorization", "credentials", "name") != "dsguard-metrics-scraper" {
				t.Errorf("ServiceMonitor endpoint: want honorLabels and the scraper's token by authorization, got %v", ep)
			}
			var secret bool
			for _, s := range find(objs, "Secret") {
				if get(s, "metadata", "name") == "dsguard-metrics-scraper" && get(s, "type") == "kubernetes.io/service-account-token" {
					secret = true
				}
			}
			if !secret {
				t.Error("no token Secret for the ServiceMonitor's authorization")
			}
		})
	}
}
