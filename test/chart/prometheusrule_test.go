package chart

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// alerts are the alerts the PrometheusRule ships; docs/operations.md has a
// section (## <name>) for each.
var alerts = []string{"DsguardDown", "DsguardWebhookErrors", "DsguardWebhookSlow", "DsguardPolicyDegraded", "DsguardPolicyWeakened",
	"DsguardPersistentCoverageGap", "DsguardNodesSkippedByTaint", "DsguardAuditorNotRunning", "DsguardCertificateExpiresSoon", "DsguardNodeViewStale"}

// metricDef is a series name a Go source defines, with its labels.
type metricDef struct {
	labels []string
	source string
}

// definedMetrics reads the metric names and label names from the Go sources
// that register them: dsguard's webhook package and controller-runtime's
// webhook metrics, at the version go.mod requires. Histograms contribute
// their _bucket (with le), _sum and _count series.
func definedMetrics(t *testing.T, root string) map[string]metricDef {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/controller-runtime")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("locating controller-runtime in the module cache: %v", err)
	}
	crDir := strings.TrimSpace(string(out))

	files := append(productFiles(t, root), filepath.Join(crDir, "pkg", "webhook", "internal", "metrics", "metrics.go"))
	defs := map[string]metricDef{}
	constructor := regexp.MustCompile(`^New((Counter|Gauge|Histogram|Summary)(Vec|Func)?|Desc)$`)
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			// client_golang's version collector: <program>_build_info,
			// its labels fixed by the collector.
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "versioncollector" && sel.Sel.Name == "NewCollector" {
				defs[stringLit(call.Args[0])+"_build_info"] = metricDef{source: filepath.Base(file),
					labels: []string{"version", "revision", "branch", "goversion", "goos", "goarch", "tags"}}
				return true
			}
			if !constructor.MatchString(sel.Sel.Name) {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
				return true
			}
			name := ""
			// prometheus.NewDesc(name, help, labels, constLabels): the
			// descriptions of metrics a collector makes when scraped.
			if sel.Sel.Name == "NewDesc" && len(call.Args) == 4 {
				name = stringLit(call.Args[0])
				call = &ast.CallExpr{Fun: call.Fun, Args: []ast.Expr{call.Args[0], call.Args[2]}}
			}
			if opts, ok := call.Args[0].(*ast.CompositeLit); ok {
				for _, el := range opts.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
							name = stringLit(kv.Value)
						}
					}
				}
			}
			if name == "" {
				t.Fatalf("%s: a %s without a literal Name; extend this test", file, sel.Sel.Name)
			}
			var labels []string
			if len(call.Args) > 1 {
				if l, ok := call.Args[1].(*ast.CompositeLit); ok {
					for _, el := range l.Elts {
						labels = append(labels, stringLit(el))
					}
				}
			}
			src := filepath.Base(file)
			if strings.Contains(sel.Sel.Name, "Histogram") {
				defs[name+"_bucket"] = metricDef{labels: append(slices.Clone(labels), "le"), source: src}
				defs[name+"_sum"] = metricDef{labels: labels, source: src}
				defs[name+"_count"] = metricDef{labels: labels, source: src}
			} else {
				defs[name] = metricDef{labels: labels, source: src}
			}
			return true
		})
	}
	for _, want := range []string{"dsguard_admission_decisions_total", "dsguard_daemonset_state", "dsguard_build_info",
		"controller_runtime_webhook_requests_total", "controller_runtime_webhook_latency_seconds_bucket"} {
		if _, ok := defs[want]; !ok {
			t.Fatalf("found no definition of %s in %v: the source parsing is broken", want, files)
		}
	}
	// Prometheus' own series per target.
	defs["up"] = metricDef{source: "Prometheus"}
	return defs
}

func stringLit(e ast.Expr) string {
	if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
		s, err := strconv.Unquote(b.Value)
		if err == nil {
			return s
		}
	}
	return ""
}

// labelValues returns the strings dsguard may write as label values: every
// string literal of its packages (typed string constants such as StatusState
// and SkipKind among them).
func labelValues(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, file := range productFiles(t, root) {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ImportSpec:
				return false
			case *ast.BasicLit:
				if s := stringLit(n); s != "" {
					out[s] = true
				}
			}
			return true
		})
	}
	return out
}

// productFiles returns the Go files of dsguard's own packages, wherever the
// package layout puts them: everything but tests, test/ and hack/.
func productFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (rel == "test" || rel == "hack" || strings.HasPrefix(d.Name(), ".") && rel != ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// targetLabels are the labels the ServiceMonitor's scrape adds to every
// series; a series' own label of the same name becomes exported_<name>.
var targetLabels = []string{"job", "namespace", "instance", "pod", "service", "container", "endpoint"}

// selector is one vector selector of a PromQL expression.
type selector struct {
	metric   string
	matchers map[string]string // label → value, for = and =~
}

var (
	promSelector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)?\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promIdent    = regexp.MustCompile(`(^|[^a-zA-Z0-9_:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
)

// parsePromQL returns the vector selectors of expr and the labels of its
// by/without/on/ignoring clauses. It knows the PromQL the chart writes
// (selectors, functions, aggregations, ranges, comparisons), not all of PromQL.
func parsePromQL(t *testing.T, expr string) ([]selector, []string) {
	t.Helper()
	var sels []selector
	rest := promSelector.ReplaceAllStringFunc(expr, func(m string) string {
		sub := promSelector.FindStringSubmatch(m)
		s := selector{metric: sub[1], matchers: map[string]string{}}
		for _, mm := range promMatcher.FindAllStringSubmatch(sub[2], -1) {
			s.matchers[mm[1]] = mm[3]
		}
		if s.metric == "" {
			t.Errorf("selector without a metric name in %q", expr)
		}
		sels = append(sels, s)
		return sub[1] + " "
	})
	var grouping []string
	rest = promGrouping.ReplaceAllStringFunc(rest, func(m string) string {
		for _, l := range strings.Split(promGrouping.FindStringSubmatch(m)[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				grouping = append(grouping, l)
			}
		}
		return " "
	})
	rest = promRange.ReplaceAllString(rest, " ")
	// Names that are neither functions nor keywords are bare selectors.
	seen := map[string]int{}
	for _, s := range sels {
		seen[s.metric]++
	}
	for _, m := range promIdent.FindAllStringSubmatch(rest, -1) {
		name, call := m[2], m[3] != ""
		if call || slices.Contains(promKeywords, name) {
			continue
		}
		if seen[name] > 0 {
			seen[name]--
			continue
		}
		sels = append(sels, selector{metric: name, matchers: map[string]string{}})
	}
	return sels, grouping
}

// TestPrometheusRule_MatchesTheMetrics renders the PrometheusRule and checks
// every alert against the code: each metric an expression selects is one
// dsguard or controller-runtime defines (or Prometheus' up), each label it
// matches or groups by is one that series has (or a target label), and each
// value it matches on a series' own label is a string the code writes. Each alert
// has a severity, a summary, a description, a runbook_url to its section of
// docs/operations.md, and that section exists.
func TestPrometheusRule_MatchesTheMetrics(t *testing.T) {
	e := setup(t)
	defs := definedMetrics(t, e.root)
	values := labelValues(t, e.root)
	runbook, err := os.ReadFile(filepath.Join(e.root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	const base = "https://github.com/dsguard/dsguard/blob/v0.1.0/docs/operations.md"

	objs := objects(t, e.template(t, e.helms()[0], valueCase{values: "fail-open-monitored.yaml"}.args()...))
	rules := find(objs, "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("fail-open-monitored: %d PrometheusRules, want 1", len(rules))
	}
	if get(rules[0], "metadata", "labels", "release") != "prometheus" {
		t.Errorf("prometheusRule.labels not applied: %v", get(rules[0], "metadata", "labels"))
	}
	var names []string
	for _, g := range get(rules[0], "spec", "groups").([]any) {
		for _, r := range get(g, "rules").([]any) {
			name, _ := get(r, "alert").(string)
			names = append(names, name)
			t.Run(name, func(t *testing.T) {
				if sev := get(r, "labels", "severity"); !slices.Contains([]any{"critical", "warning", "info"}, sev) {
					t.Errorf("severity %v, want critical, warning or info", sev)
				}
				for _, a := range []string{"summary", "description"} {
					if s, _ := get(r, "annotations", a).(string); len(s) < 20 {
						t.Errorf("annotation %s is missing or too short: %q", a, s)
					}
				}
				if got, want := get(r, "annotations", "runbook_url"), base+"#"+strings.ToLower(name); got != want {
					t.Errorf("runbook_url = %v, want %s", got, want)
				}
				if !regexp.MustCompile(`(?m)^## ` + name + `$`).Match(runbook) {
					t.Errorf("docs/operations.md has no section \"## %s\"", name)
				}

				expr, _ := get(r, "expr").(string)
				sels, grouping := parsePromQL(t, expr)
				if len(sels) == 0 {
					t.Fatalf("no metric found in %q", expr)
				}
				for _, s := range sels {
					def, ok := defs[s.metric]
					if !ok {
						t.Errorf("%s is not a metric dsguard or controller-runtime defines", s.metric)
						continue
					}
					allowed := slices.Clone(targetLabels)
					for _, l := range def.labels {
						allowed = append(allowed, l)
						if slices.Contains(targetLabels, l) {
							allowed = append(allowed, "exported_"+l)
						}
					}
					for l, v := range s.matchers {
						if !slices.Contains(allowed, l) {
							t.Errorf("%s has no label %s (%s defines %v)", s.metric, l, def.source, def.labels)
						}
						if slices.Contains(targetLabels, l) || !regexp.MustCompile(`^[A-Za-z-]+(\|[A-Za-z-]+)*$`).MatchString(v) {
							continue // a target label, or a pattern rather than values
						}
						for _, val := range strings.Split(v, "|") {
							if !values[val] {
								t.Errorf("%s{%s=%q}: dsguard never writes %q (no string in webhook/, no constant in policy/)", s.metric, l, v, val)
							}
						}
					}
					for _, l := range grouping {
						if !slices.Contains(allowed, l) {
							t.Errorf("grouping by %s, which %s does not have (%v)", l, s.metric, def.labels)
						}
					}
				}
			})
		}
	}
	if !slices.Equal(names, alerts) {
		t.Errorf("alerts %v, want %v", names, alerts)
	}
}

// TestPrometheusRule_Options: off by default, no runbook_url without
// runbookBaseURL, DsguardDown critical with failurePolicy Fail, and a clear
// error when metrics are off.
func TestPrometheusRule_Options(t *testing.T) {
	e := setup(t)
	for _, h := range e.helms() {
		t.Run(h.name, func(t *testing.T) {
			if n := len(find(objects(t, e.template(t, h)), "PrometheusRule")); n != 0 {
				t.Errorf("default: %d PrometheusRules, want none", n)
			}
			objs := objects(t, e.template(t, h, "--set", "prometheusRule.enabled=true"))
			rules := find(objs, "PrometheusRule")
			if len(rules) != 1 {
				t.Fatalf("%d PrometheusRules, want 1", len(rules))
			}
			rs := get(rules[0], "spec", "groups", 0, "rules").([]any)
			var chart struct {
				AppVersion string `json:"appVersion"`
			}
			readYAML(t, filepath.Join(e.root, "charts", "dsguard", "Chart.yaml"), &chart)
			pinned := "https://github.com/dsguard/dsguard/blob/v" + chart.AppVersion + "/docs/operations.md#"
			for _, r := range rs {
				if u := get(r, "annotations", "runbook_url"); u != pinned+strings.ToLower(get(r, "alert").(string)) {
					t.Errorf("%v: runbook_url %v without runbookBaseURL, want the chart's own release's runbook %s...", get(r, "alert"), u, pinned)
				}
			}
			if get(rs[0], "alert") != "DsguardDown" || get(rs[0], "labels", "severity") != "critical" {
				t.Errorf("with failurePolicy Fail, want DsguardDown critical: %v", rs[0])
			}
			if got := get(rs[2], "expr"); !strings.HasSuffix(strings.TrimSpace(got.(string)), "> 2.5") {
				t.Errorf("DsguardWebhookSlow with timeoutSeconds 5: %v, want a threshold of 2.5s", got)
			}

			r := e.run(h.path, "template", "dsguard", "charts/dsguard", "--set", "prometheusRule.enabled=true",
				"--set", "metrics.enabled=false")
			if r.err == nil || !strings.Contains(r.stderr, "prometheusRule.enabled needs metrics.enabled") {
				t.Errorf("want prometheusRule without metrics refused:\n%s", r)
			}
			r = e.run(h.path, "template", "dsguard", "charts/dsguard", "--set", "prometheusRule.runbookBaseURL=docs/operations.md")
			if r.err == nil || !strings.Contains(r.stderr, "schema") {
				t.Errorf("want a runbookBaseURL that is no URL refused by the schema:\n%s", r)
			}
		})
	}
}
