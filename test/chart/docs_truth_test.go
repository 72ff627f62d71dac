package chart

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/webhook"
)

// docsTruth is what the docs may name, read from the code and the rendered
// chart rather than written down a second time.
type docsTruth struct {
	// entries are the webhook entries of the default install, in order.
	entries []string
	// resources are the dsguard.io resources RBAC grants, as
	// <resource>.<group> (exemptions.dsguard.io): they look like entry names.
	resources []string
	paths     []string // the paths dsguard serves reviews on
	alerts    []string // the PrometheusRule's alerts
	metrics   map[string]metricDef
}

// numberWords spell the counts the docs write out.
var numberWords = []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}

var (
	// A name ending in .dsguard.io not followed by a path (exempt.dsguard.io/<rule> is an annotation key).
	docEntryName  = regexp.MustCompile(`\b([a-z0-9-]+(?:\.[a-z0-9-]+)*\.dsguard\.io)\b(?:[^/a-z0-9.-]|\.(?:\s|$)|$)`)
	docPath       = regexp.MustCompile(`/validate-[a-z-]+`)
	docAlert      = regexp.MustCompile(`\bDsguard[A-Z][A-Za-z]+\b`)
	docMetric     = regexp.MustCompile(`\b(?:dsguard|controller_runtime_webhook)_[a-z0-9_]*[a-z0-9]\b`)
	docEntryCount = regexp.MustCompile(`\b(` + strings.Join(numberWords, "|") + `) (?:webhook )?entries\b`)
	docEntryRow   = regexp.MustCompile("(?m)^\\| `([a-z0-9.-]+\\.dsguard\\.io)` \\|")
)

// docsProblems lists each statement of docs (file → text) that names an
// entry, a path, an alert or a metric that does not exist, or counts the
// entries wrongly; chartReadme is the file whose entry table must list every
// entry.
func docsProblems(docs map[string]string, chartReadme string, truth docsTruth) []string {
	var out []string
	for _, file := range slices.Sorted(maps.Keys(docs)) {
		text := docs[file]
		line := func(offset int) int { return strings.Count(text[:offset], "\n") + 1 }
		for _, m := range docEntryName.FindAllStringSubmatchIndex(text, -1) {
			name := text[m[2]:m[3]]
			if !slices.Contains(truth.entries, name) && !slices.Contains(truth.resources, name) {
				out = append(out, fmt.Sprintf("%s:%d: %s is no webhook entry of the chart (%s) nor a resource of its RBAC (%s)",
					file, line(m[0]), name, strings.Join(truth.entries, ", "), strings.Join(truth.resources, ", ")))
			}
		}
		for _, m := range docPath.FindAllStringIndex(text, -1) {
			if p := text[m[0]:m[1]]; !slices.Contains(truth.paths, p) {
				out = append(out, fmt.Sprintf("%s:%d: dsguard serves no %s (it serves %s)", file, line(m[0]), p, strings.Join(truth.paths, ", ")))
			}
		}
		for _, m := range docAlert.FindAllStringIndex(text, -1) {
			if a := text[m[0]:m[1]]; !slices.Contains(truth.alerts, a) {
				out = append(out, fmt.Sprintf("%s:%d: the chart has no alert %s", file, line(m[0]), a))
			}
		}
		for _, m := range docMetric.FindAllStringIndex(text, -1) {
			name := text[m[0]:m[1]]
			_, ok := truth.metrics[name]
			_, histogram := truth.metrics[name+"_bucket"]
			if !ok && !histogram {
				out = append(out, fmt.Sprintf("%s:%d: %s is no metric dsguard or controller-runtime defines", file, line(m[0]), name))
			}
		}
		for _, m := range docEntryCount.FindAllStringSubmatchIndex(text, -1) {
			word := text[m[2]:m[3]]
			if n := slices.Index(numberWords, word); n != len(truth.entries) {
				out = append(out, fmt.Sprintf("%s:%d: %q: the chart has %d webhook entries", file, line(m[0]), text[m[0]:m[1]], len(truth.entries)))
			}
		}
	}
	var rows []string
	for _, m := range docEntryRow.FindAllStringSubmatch(docs[chartReadme], -1) {
		rows = append(rows, m[1])
	}
	if !slices.Equal(rows, truth.entries) {
		out = append(out, fmt.Sprintf("%s: the webhook entries table lists %v, the chart renders %v", chartReadme, rows, truth.entries))
	}
	return out
}

// readTruth renders the chart (defaults, and with the PrometheusRule) and
// reads the code for what the docs may name.
func readTruth(t *testing.T, e env) docsTruth {
	t.Helper()
	h := e.helms()[0]
	truth := docsTruth{metrics: definedMetrics(t, e.root),
		paths: []string{webhook.DaemonSetPath, webhook.NodePath, webhook.PolicyConfigMapPath}}
	objs := objects(t, e.template(t, h))
	vwcs := find(objs, "ValidatingWebhookConfiguration")
	if len(vwcs) != 1 {
		t.Fatalf("the default install renders %d ValidatingWebhookConfigurations, want 1", len(vwcs))
	}
	for _, w := range get(vwcs[0], "webhooks").([]any) {
		truth.entries = append(truth.entries, get(w, "name").(string))
		path, _ := get(w, "clientConfig", "service", "path").(string)
		if !slices.Contains(truth.paths, path) {
			t.Errorf("entry %v calls %q, which is none of the paths dsguard serves %v", get(w, "name"), path, truth.paths)
		}
	}
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, role := range find(objs, kind) {
			rules, _ := get(role, "rules").([]any)
			for _, r := range rules {
				groups, _ := get(r, "apiGroups").([]any)
				resources, _ := get(r, "resources").([]any)
				for _, g := range groups {
					if g, _ := g.(string); strings.HasSuffix(g, "dsguard.io") {
						for _, res := range resources {
							truth.resources = append(truth.resources, fmt.Sprintf("%v.%s", res, g))
						}
					}
				}
			}
		}
	}
	sort.Strings(truth.resources)
	truth.resources = slices.Compact(truth.resources)
	monitored := objects(t, e.template(t, h, valueCase{values: "fail-open-monitored.yaml"}.args()...))
	for _, r := range find(monitored, "PrometheusRule") {
		for _, g := range get(r, "spec", "groups").([]any) {
			for _, rule := range get(g, "rules").([]any) {
				if a, ok := get(rule, "alert").(string); ok {
					truth.alerts = append(truth.alerts, a)
				}
			}
		}
	}
	if len(truth.entries) == 0 || len(truth.alerts) == 0 || len(truth.resources) == 0 {
		t.Fatalf("read nothing to check against: entries %v, alerts %v, resources %v", truth.entries, truth.alerts, truth.resources)
	}
	return truth
}

// TestDocs_NameWhatTheChartAndTheCodeHave reads every page a user reads
// (README, docs/, the chart's README and notes) for webhook entry names,
// serve paths, alert names and metric names, and fails on any the rendered
// chart or the code does not have, and on a wrong count of entries.
func TestDocs_NameWhatTheChartAndTheCodeHave(t *testing.T) {
	e := setup(t)
	truth := readTruth(t, e)
	pages, err := filepath.Glob(filepath.Join(e.root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	const chartReadme = "charts/dsguard/README.md"
	pages = append(pages, filepath.Join(e.root, "README.md"), filepath.Join(e.root, chartReadme),
		filepath.Join(e.root, "charts", "dsguard", "templates", "NOTES.txt"))
	docs := map[string]string{}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(e.root, p)
		docs[rel] = string(b)
	}
	for _, p := range docsProblems(docs, chartReadme, truth) {
		t.Error(p)
	}
}

// TestDocsProblems_CatchWrongNames is the check's own test: each page names
// one thing that does not exist, and must be caught.
func TestDocsProblems_CatchWrongNames(t *testing.T) {
	truth := docsTruth{
		entries:   []string{"daemonsets.dsguard.io", "policy.dsguard.io"},
		resources: []string{"exemptions.dsguard.io"},
		paths:     []string{"/validate-daemonset"},
		alerts:    []string{"DsguardDown"},
		metrics:   map[string]metricDef{"dsguard_admission_decisions_total": {}, "dsguard_latency_seconds_bucket": {}},
	}
	table := "| `daemonsets.dsguard.io` | a |\n| `policy.dsguard.io` | b |\n"
	good := table + "`daemonsets.dsguard.io` calls /validate-daemonset; create `exemptions.dsguard.io`; the annotation " +
		"`exempt.dsguard.io/node-coverage`, the label dsguard.io/policy; DsguardDown reads " +
		"dsguard_admission_decisions_total and dsguard_latency_seconds. Two entries. policy.dsguard.io.\n"
	if got := docsProblems(map[string]string{"README.md": good}, "README.md", truth); len(got) != 0 {
		t.Fatalf("a page naming only what exists gave %q", got)
	}
	for name, page := range map[string]string{
		"entry":       "the entry `kube-system.daemonsets.dsguard.io` fails open",
		"entry, bare": "see nodes.dsguard.io.",
		"path":        "it serves /validate-pod",
		"alert":       "DsguardGone fires",
		"metric":      "`dsguard_decisions_total` counts",
		"count":       "three entries, below",
	} {
		t.Run(name, func(t *testing.T) {
			got := docsProblems(map[string]string{"README.md": table, "docs/x.md": page}, "README.md", truth)
			if len(got) != 1 || !strings.HasPrefix(got[0], "docs/x.md:1: ") {
				t.Errorf("%q: got %q, want one problem on docs/x.md:1", page, got)
			}
		})
	}
	t.Run("table", func(t *testing.T) {
		got := docsProblems(map[string]string{"README.md": "| `daemonsets.dsguard.io` | a |\n"}, "README.md", truth)
		if len(got) != 1 || !strings.Contains(got[0], "entries table") {
			t.Errorf("a table missing an entry: got %q", got)
		}
	})
}
