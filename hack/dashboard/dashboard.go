package main

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// The selectors of the queries. A replica's own series carry the job and
// namespace the chart's ServiceMonitor gives them; the per-DaemonSet and
// exemption series keep their own namespace label (honorLabels), so they
// are selected by job alone, as the chart's alerts select them.
const (
	replica = `job="$job",namespace="$namespace"`
	byJob   = `job="$job"`
)

// q fills the selectors into a query template: {R} for a replica's series,
// {J} for the per-DaemonSet ones.
func q(template string) string {
	return strings.NewReplacer("{R}", replica, "{J}", byJob).Replace(template)
}

// datasource is the Prometheus the dashboard's variable picks.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// query is one target of a panel: an expression and its legend.
type query struct{ expr, legend string }

func target(qr query) *prometheus.DataqueryBuilder {
	t := prometheus.NewDataqueryBuilder().Expr(qr.expr).Datasource(datasource)
	if qr.legend != "" {
		t = t.LegendFormat(qr.legend)
	}
	return t
}

// series is a time series panel.
func series(title, description, unit string, width uint32, queries ...query) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(description).Unit(unit).
		Datasource(datasource).Height(8).Span(width).Min(0)
	for _, qr := range queries {
		p = p.WithTarget(target(qr))
	}
	return p
}

// single is a stat panel of one value.
func single(title, description, unit string, qr query) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(description).Unit(unit).
		Datasource(datasource).Height(4).Span(4).WithTarget(target(qr))
}

// Dashboard is dsguard's dashboard.
func Dashboard() *dashboard.DashboardBuilder {
	refresh := dashboard.VariableRefreshOnTimeRangeChanged
	return dashboard.NewDashboardBuilder("dsguard").
		Uid("dsguard").
		Description("DaemonSet coverage (nodes each agent skips and why, gaps, exemptions) and the dsguard webhook's decisions, latency, policy and certificates.").
		Tags([]string{"dsguard", "daemonset", "admission"}).
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("job").Label("dsguard").Datasource(datasource).
			Query(dashboard.StringOrMap{String: cog.ToPtr("label_values(dsguard_build_info, job)")}).Refresh(refresh)).
		WithVariable(dashboard.NewQueryVariableBuilder("namespace").Label("Release namespace").Datasource(datasource).
			Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(dsguard_build_info{job="$job"}, namespace)`)}).Refresh(refresh)).
		WithRow(dashboard.NewRowBuilder("Health")).
		WithPanel(single("Replicas up", "Replicas Prometheus scrapes. None: DsguardDown.", "none",
			query{expr: q(`sum(up{{R}})`)})).
		WithPanel(single("Auditor running", "Replicas running the coverage auditor (the Lease holder): 1 expected. 0: DsguardAuditorNotRunning.", "none",
			query{expr: q(`sum(dsguard_auditor_running{{R}})`)})).
		WithPanel(single("Policy degraded", "1 while the policy ConfigMap is invalid and the last good policy is enforced (DsguardPolicyDegraded).", "none",
			query{expr: q(`max(dsguard_policy_degraded{{R}})`)})).
		WithPanel(single("Policy generation", "The policy the replicas enforce; it steps up at each accepted reload.", "none",
			query{expr: q(`max(dsguard_policy_generation{{R}})`)})).
		WithPanel(single("First certificate expiry", "Time left on the certificate that expires first (DsguardCertificateExpiresSoon below 7 days).", "s",
			query{expr: q(`min(dsguard_certificate_expiry_timestamp_seconds{{R}}) - time()`)})).
		WithPanel(single("Oldest node view", "Seconds since the slowest replica heard from the API server (DsguardNodeViewStale above 120).", "s",
			query{expr: q(`max(dsguard_node_view_age_seconds{{R}})`)})).
		WithRow(dashboard.NewRowBuilder("Coverage")).
		WithPanel(series("Nodes without a ready agent", "Per DaemonSet: nodes it is desired on minus nodes where its Pod is ready.", "none", 12,
			query{expr: q(`max by (namespace, daemonset) (dsguard_daemonset_status{{J},counter="desired"}) - max by (namespace, daemonset) (dsguard_daemonset_status{{J},counter="ready"}) > 0`),
				legend: "{{namespace}}/{{daemonset}}"})).
		WithPanel(series("Ready share of predicted nodes", "Per DaemonSet: ready Pods over the nodes dsguard predicts it runs on (what desiredNumberScheduled will be).", "percentunit", 12,
			query{expr: q(`max by (namespace, daemonset) (dsguard_daemonset_status{{J},counter="ready"}) / max by (namespace, daemonset) (dsguard_daemonset_predicted_nodes{{J}} > 0)`),
				legend: "{{namespace}}/{{daemonset}}"})).
		WithPanel(series("Skipped nodes by reason", "Nodes the DaemonSets skip, summed over DaemonSets: an untolerated taint, a selector, os/arch, nodeName; intended-taint is a declared gap.", "none", 12,
			query{expr: q(`sum by (reason) (dsguard_daemonset_uncovered_nodes{{J}})`), legend: "{{reason}}"})).
		WithPanel(series("DaemonSets by audit state", "How many DaemonSets are Healthy, RollingOut, in a CoverageGap or PersistentGap, Misscheduled, ...", "none", 12,
			query{expr: q(`sum by (state) (dsguard_daemonset_state{{J}})`), legend: "{{state}}"})).
		WithPanel(series("Active exemptions", "Exemptions in force, by rule and exempted namespace.", "none", 12,
			query{expr: q(`sum by (rule, namespace) (dsguard_exemptions_active{{J}})`), legend: "{{rule}} in {{namespace}}"})).
		WithPanel(series("Skipped nodes by taint, per DaemonSet", "Nodes each DaemonSet skips for a taint it does not tolerate (DsguardNodesSkippedByTaint after an hour).", "none", 12,
			query{expr: q(`max by (namespace, daemonset) (dsguard_daemonset_uncovered_nodes{{J},reason="taint"}) > 0`), legend: "{{namespace}}/{{daemonset}}"})).
		WithRow(dashboard.NewRowBuilder("Admission")).
		WithPanel(series("Decisions", "DaemonSet reviews per second by result (allowed, warned, denied, error, ...).", "reqps", 8,
			query{expr: q(`sum by (result) (rate(dsguard_admission_decisions_total{{R}}[$__rate_interval]))`), legend: "{{result}}"})).
		WithPanel(series("Findings by rule", "Findings per second by rule and action.", "reqps", 8,
			query{expr: q(`sum by (rule, action) (rate(dsguard_findings_total{{R}}[$__rate_interval]))`), legend: "{{rule}} {{action}}"})).
		WithPanel(series("Review latency", "p50 and p99 of the webhook's reviews, by path; past timeoutSeconds the API server applies the failurePolicy.", "s", 8,
			query{expr: q(`histogram_quantile(0.5, sum by (webhook, le) (rate(controller_runtime_webhook_latency_seconds_bucket{{R}}[$__rate_interval])))`), legend: "p50 {{webhook}}"},
			query{expr: q(`histogram_quantile(0.99, sum by (webhook, le) (rate(controller_runtime_webhook_latency_seconds_bucket{{R}}[$__rate_interval])))`), legend: "p99 {{webhook}}"})).
		WithPanel(series("Node change decisions", "Reviews of people's Node taint and label changes, by result.", "reqps", 8,
			query{expr: q(`sum by (result) (rate(dsguard_node_change_decisions_total{{R}}[$__rate_interval]))`), legend: "{{result}}"})).
		WithPanel(series("Refused as busy", "Reviews refused before evaluation, by reason and caller (slow bodies, the heavy lane full, ...).", "reqps", 8,
			query{expr: q(`sum by (reason, caller) (rate(dsguard_webhook_refusals_total{{R}}[$__rate_interval]))`), legend: "{{reason}} ({{caller}})"})).
		WithPanel(series("Policy reloads", "Policy ConfigMap reloads per second by result; an invalid one keeps the last good policy.", "reqps", 8,
			query{expr: q(`sum by (result) (rate(dsguard_policy_reloads_total{{R}}[$__rate_interval]))`), legend: "{{result}}"},
			query{expr: q(`max by (reason) (dsguard_policy_weakened{{R}}) > 0`), legend: "weakened: {{reason}}"}))
}
