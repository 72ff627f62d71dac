package framework

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckQueryLabels(t *testing.T) {
	s := Series{
		Exported: map[string][]string{
			"status":         {"counter", "daemonset", "namespace"},
			"predicted":      {"daemonset", "namespace"},
			"exemptions":     {"rule"},
			"decisions":      {"result"},
			"latency_bucket": {"le", "webhook"},
		},
		Target: []string{"job", "namespace"},
	}
	cases := []struct {
		name, expr string
		checked    int
		// problems are fragments of each problem, in order; none: none.
		problems []string
	}{{
		name: "the dashboard's difference of two groupings by the same labels",
		expr: `max by (namespace, daemonset) (status{job="$job",counter="desired"}) - max by (namespace, daemonset) (status{job="$job",counter="ready"}) > 0`,
		// 4 grouping labels, 4 matchers, the sides' labels.
		checked: 9,
	}, {
		name:     "a grouping label the series lack",
		expr:     `sum by (reason) (status{job="$job"})`,
		checked:  2,
		problems: []string{"sum by (reason) (status): reason is not a label of status (its labels: counter, daemonset, namespace)"},
	}, {
		name:     "a target label does not stand in for a grouping label the series lack",
		expr:     `sum by (rule, namespace) (exemptions{job="$job"})`,
		checked:  3,
		problems: []string{"namespace is not a label of exemptions (its labels: rule)"},
	}, {
		name:    "a matcher on a target label",
		expr:    `sum(decisions{job="$job",namespace="$namespace"})`,
		checked: 2,
	}, {
		name:     "a matcher on a label the series lack",
		expr:     `sum(status{job="$job",reason="taint"})`,
		checked:  2,
		problems: []string{"status{reason}: reason is not a label of status"},
	}, {
		name:     "by after the argument, over a range function",
		expr:     `sum(rate(decisions{job="$job"}[$__rate_interval])) by (result, caller)`,
		checked:  3,
		problems: []string{"caller is not a label of decisions"},
	}, {
		name:     "without",
		expr:     `sum without (pod) (decisions)`,
		checked:  1,
		problems: []string{"pod is not a label of decisions"},
	}, {
		name:    "histogram_quantile over buckets grouped with le",
		expr:    `histogram_quantile(0.99, sum by (webhook, le) (rate(latency_bucket{job="$job"}[5m])))`,
		checked: 4,
	}, {
		name:     "histogram_quantile over buckets grouped without le",
		expr:     `histogram_quantile(0.99, sum by (webhook) (rate(latency_bucket[5m])))`,
		checked:  2,
		problems: []string{"histogram_quantile: le is not a label of sum by (webhook) (latency_bucket) (its labels: webhook)"},
	}, {
		name:     "an outer grouping reads the inner one's labels, not the metric's",
		expr:     `sum by (namespace) (max by (daemonset) (predicted))`,
		checked:  2,
		problems: []string{"namespace is not a label of max by (daemonset) (predicted)"},
	}, {
		name:     "sides grouped by different labels never match",
		expr:     `max by (namespace, daemonset) (status) / max by (namespace) (predicted > 0)`,
		checked:  4,
		problems: []string{"carry different ones (daemonset, namespace; namespace): no series matches"},
	}, {
		name:     "on names a label of both sides",
		expr:     `status / on (namespace, counter) predicted`,
		checked:  4,
		problems: []string{"counter is not a label of predicted"},
	}, {
		name:     "label_replace's source label",
		expr:     `label_replace(decisions, "verdict", "$1", "outcome", "(.*)")`,
		checked:  1,
		problems: []string{"label_replace: outcome is not a label of decisions"},
	}, {
		name:     "a series the scrape does not hold cannot be grouped unchecked",
		expr:     `sum by (reason, caller) (rate(refusals{job="$job"}[5m]))`,
		checked:  3,
		problems: []string{"refusals is not in the scrape, so its label reason cannot be checked", "its label caller cannot be checked"},
	}, {
		name:    "a series the scrape does not hold, neither grouped nor matched on its own labels",
		expr:    `sum(up{job="$job",namespace="$namespace"})`,
		checked: 2,
	}, {
		name: "a scalar operand",
		expr: `min(predicted{job="$job"}) - time()`, checked: 1,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checked, problems, err := CheckQueryLabels(tc.expr, s)
			if err != nil {
				t.Fatal(err)
			}
			if checked != tc.checked {
				t.Errorf("checked %d labels, want %d", checked, tc.checked)
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems:\n%s\nwant %d:\n%s", strings.Join(problems, "\n"), len(tc.problems), strings.Join(tc.problems, "\n"))
			}
			for i, want := range tc.problems {
				if !strings.Contains(problems[i], want) {
					t.Errorf("problem %d: %s\nwant it to say: %s", i, problems[i], want)
				}
			}
		})
	}
}

// An expression the reader cannot follow is an error, not a pass.
func TestCheckQueryLabels_WhatItCannotReadFails(t *testing.T) {
	for _, expr := range []string{
		`absent_whatever(decisions)`,
		`sum by (result (decisions)`,
		`decisions{result="allowed"`,
		`sum(decisions) by`,
		`topk(decisions)`,
	} {
		if _, _, err := CheckQueryLabels(expr, Series{}); err == nil {
			t.Errorf("%s: no error", expr)
		}
	}
}

func TestExportedLabels(t *testing.T) {
	exposition := `# HELP d Decisions.
# TYPE d counter
d{result="allowed"} 1
d{result="denied",extra="x"} 1
# HELP h Latency.
# TYPE h histogram
h_bucket{webhook="/a",le="1"} 1
h_bucket{webhook="/a",le="+Inf"} 1
h_sum{webhook="/a"} 1
h_count{webhook="/a"} 1
# HELP g A gauge.
# TYPE g gauge
g 1
`
	got, err := ExportedLabels([]byte(exposition))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"d": {"extra", "result"}, "g": {},
		"h_bucket": {"le", "webhook"}, "h_sum": {"webhook"}, "h_count": {"webhook"},
	}
	if len(got) != len(want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
	for name, labels := range want {
		if l, ok := got[name]; !ok || !slices.Equal(l, labels) {
			t.Errorf("%s: labels %q (found %v), want %q", name, l, ok, labels)
		}
	}
}
