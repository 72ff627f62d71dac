package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestAlerts_PromtoolRuleTests runs Prometheus' own rule checker and rule
// test runner (promtool, built from the Prometheus module by
// hack/tools.sh) on the chart's alerts: `promtool check rules` on the
// rendered rules as the Prometheus Operator hands them to Prometheus, and
// `promtool test rules` on testdata/promtool/alerts.test.yaml, in which every
// shipped alert fires on the series that mean trouble and stays quiet before
// its `for` has passed or on healthy series.
func TestAlerts_PromtoolRuleTests(t *testing.T) {
	e := setup(t)
	promtool := e.promtool(t)

	rules := find(objects(t, e.template(t, e.helms()[0], "--set", "prometheusRule.enabled=true")), "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(rules))
	}
	groups, _ := get(rules[0], "spec", "groups").([]any)
	dir := t.TempDir()
	full := filepath.Join(dir, "full.yaml")
	writeYAML(t, full, map[string]any{"groups": groups})
	if r := framework.Logged(t, framework.Run(t.Context(), dir, "", nil, promtool, "check", "rules", full)); r.Err != nil {
		t.Fatalf("promtool check rules: %s", r.Error())
	}

	// The test file compares annotations in full: it names the summary
	// (which templates the alert's labels); description and runbook are
	// prose, checked above and by TestPrometheusRule_MatchesTheMetrics.
	var shipped []string
	for _, g := range groups {
		for _, rule := range get(g, "rules").([]any) {
			m := rule.(map[string]any)
			shipped = append(shipped, m["alert"].(string))
			m["annotations"] = map[string]any{"summary": get(m, "annotations", "summary")}
		}
	}
	writeYAML(t, filepath.Join(dir, "rules.yaml"), map[string]any{"groups": groups})
	tests, err := os.ReadFile(filepath.Join(e.root, "test", "chart", "testdata", "promtool", "alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := framework.Logged(t, framework.Run(t.Context(), dir, "", nil, promtool, "test", "rules", "alerts.test.yaml")); r.Err != nil {
		t.Fatalf("promtool test rules: %s", r.Error())
	}

	// Every alert is tested firing and quiet.
	firing := map[string]bool{}
	quiet := map[string]bool{}
	block := regexp.MustCompile(`(?m)^      - eval_time: .*\n        alertname: (\S+)\n(        exp_alerts:)?`)
	for _, m := range block.FindAllStringSubmatch(string(tests), -1) {
		if m[2] != "" {
			firing[m[1]] = true
		} else {
			quiet[m[1]] = true
		}
	}
	for _, a := range shipped {
		if !firing[a] || !quiet[a] {
			t.Errorf("alert %s: tested firing %v, quiet %v; want both in alerts.test.yaml", a, firing[a], quiet[a])
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(shipped)), slices.Sorted(slices.Values(alerts))) {
		t.Errorf("the PrometheusRule ships %v, the tests know %v", shipped, alerts)
	}
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// promtool returns promtool, built by hack/tools.sh from the Prometheus
// module on first use.
func (e env) promtool(t *testing.T) string {
	t.Helper()
	r := framework.Run(t.Context(), e.root, "", nil, "hack/tools.sh", "--only", "helm", "--print-promtool")
	if r.Err != nil {
		t.Fatalf("hack/tools.sh --print-promtool: %s", r.Error())
	}
	return strings.TrimSpace(r.Stdout)
}
