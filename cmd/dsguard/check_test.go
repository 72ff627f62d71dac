package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/policy/rules"
)

// runCLI runs dsguard in-process and returns stdout, the error and the exit
// code main would use.
func runCLI(t *testing.T, stdin string, args ...string) (string, error, int) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	code := 0
	var ee exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case err != nil:
		code = exitUsage
	}
	return out.String(), err, code
}

func TestCheck_Examples(t *testing.T) {
	out, _, code := runCLI(t, "", "check", "-f", "../../examples/")
	if code != 1 {
		t.Fatalf("exit code = %d, want 1 (deny findings)\n%s", code, out)
	}
	for _, want := range []string{
		"node-exporter.yaml: document 1: DaemonSet monitoring/node-exporter: deny",
		"DENY  control-plane-toleration  spec.template.spec.tolerations",
		"node-role.kubernetes.io/control-plane:NoSchedule",
		"node-exporter-tolerations.yaml: document 1: DaemonSet monitoring/node-exporter: pass",
		"codartium-status-example.yaml: document 1: DaemonSet default/codartium-status-example: warn",
		"WARN  image-pinned  spec.template.spec.containers[0].image",
		"DENY  surge-host-port  spec.updateStrategy.rollingUpdate.maxSurge",
		"WARN  max-unavailable  spec.updateStrategy.rollingUpdate.maxUnavailable",
		"fix: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q\n%s", want, out)
		}
	}
}

func TestCheck_JSON(t *testing.T) {
	out, _, code := runCLI(t, "", "check", "-f", "../../examples/node-exporter.yaml", "-o", "json")
	if code != 1 {
		t.Fatalf("exit code = %d, want 1\n%s", code, out)
	}
	var rep struct {
		Kind    string
		Summary struct{ DaemonSets, Denied int }
		Results []struct {
			Name, Verdict string
			Findings      []struct{ Rule, Action, Field, Message, Remediation string }
		}
		Errors []any
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Kind != "CheckReport" || rep.Summary.DaemonSets != 1 || rep.Summary.Denied != 1 || rep.Errors == nil {
		t.Fatalf("unexpected report: %+v", rep)
	}
	f := rep.Results[0].Findings[0]
	if f.Rule != "control-plane-toleration" || f.Action != "deny" || f.Field != "spec.template.spec.tolerations" || f.Remediation == "" {
		t.Errorf("first finding = %+v", f)
	}
}

func TestCheck_ExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return writeFile(t, dir, name, content) }
	misspelt := write("misspelt.yaml", "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  max-unavailable:\n    parameters:\n      maxPercnt: 10\n")
	badAction := write("bad-action.yaml", "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  privileged:\n    action: block\n")
	warnAll := write("warn.yaml", "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: warn\n")
	broken := write("broken.yaml", "kind: [\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"compliant", []string{"check", "-f", "../../examples/node-exporter-tolerations.yaml"}, 0, "1 passed"},
		{"warnings only", []string{"check", "-f", "../../examples/codartium-status-example.yaml"}, 0, "1 with warnings"},
		{"deny", []string{"check", "-f", "../../examples/node-exporter.yaml"}, 1, "1 denied"},
		{"enforcement warn turns the deny into a warning", []string{"check", "-f", "../../examples/node-exporter.yaml", "--config", warnAll}, 0, "WARN  control-plane-toleration"},
		{"misspelt policy key", []string{"check", "-f", "../../examples/", "--config", misspelt}, 2, `line 6: unknown field "maxPercnt"`},
		{"invalid action", []string{"check", "-f", "../../examples/", "--config", badAction}, 2, `line 5: rules.privileged.action: Unsupported value: "block"`},
		{"unparseable manifest", []string{"check", "-f", broken}, 2, "broken.yaml: document 1: error: not valid YAML"},
		{"missing file", []string{"check", "-f", filepath.Join(dir, "nope.yaml")}, 2, "no such file"},
		{"no input", []string{"check"}, 2, "no input"},
		{"bad output", []string{"check", "-f", broken, "-o", "xml"}, 2, "unknown output format"},
		{"unknown flag", []string{"check", "--frobnicate"}, 2, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err, code := runCLI(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d\n%s%v", code, tt.code, out, err)
			}
			text := out
			if err != nil {
				text += err.Error()
			}
			if !strings.Contains(text, tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, text)
			}
		})
	}
}

func TestCheck_Stdin(t *testing.T) {
	data, err := os.ReadFile("../../examples/node-exporter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, _, code := runCLI(t, string(data), "check", "-f", "-")
	if code != 1 || !strings.Contains(out, "-: document 1: DaemonSet monitoring/node-exporter: deny") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestRules_Markdown(t *testing.T) {
	out, err, _ := runCLI(t, "", "rules", "-o", "markdown")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Fatal("`dsguard rules -o markdown` differs from docs/rules.md: run `make docs`")
	}
	// The README's overview names every rule of the registry.
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules.Builtin().Rules() {
		if !strings.Contains(string(readme), "`"+r.ID+"`") {
			t.Errorf("README.md's Rules section does not name %s", r.ID)
		}
	}
}

// TestCheck_NodesParity: with the e2e cluster's nodes, check prints the same
// coverage verdicts the webhook gives through the real API server
// (test/e2e: TestLiveCoverage_WarningNamesSkippedNode expects this warning).
func TestCheck_NodesParity(t *testing.T) {
	warnPolicy := filepath.Join(t.TempDir(), "warn.yaml")
	if err := os.WriteFile(warnPolicy, []byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  control-plane-toleration:\n    action: warn\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := runCLI(t, "", "check", "-f", "../../examples/node-exporter.yaml", "--nodes", "../../examples/nodes.yaml", "--config", warnPolicy)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	want := "no toleration for node-role.kubernetes.io/control-plane:NoSchedule: skips cp-1 (1 of 4 nodes), unseen in desiredNumberScheduled"
	if !strings.Contains(out, "WARN  control-plane-toleration") || !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}

	// The GPU exporter selects worker-3, which it tolerates: no coverage finding.
	out, _, _ = runCLI(t, "", "check", "-f", "../../examples/node-exporter-gpu.yaml", "--nodes", "../../examples/nodes.yaml")
	if strings.Contains(out, "node-coverage") {
		t.Errorf("gpu exporter: unexpected node-coverage finding:\n%s", out)
	}
	// Without --nodes the node rules are skipped, and check says so.
	out, _, _ = runCLI(t, "", "check", "-f", "../../examples/node-exporter.yaml")
	if !strings.Contains(out, "note: node-dependent rules were skipped") {
		t.Errorf("check without --nodes must say node rules were skipped:\n%s", out)
	}
	if _, err, code := runCLI(t, "", "check", "-f", "../../examples/node-exporter.yaml", "--nodes", "../../examples/policy.yaml"); code != 2 || err == nil {
		t.Errorf("--nodes without Node objects: exit %d, err %v; want 2", code, err)
	}
}

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheck_ExitCodesInEveryFormat: every -o format writes as it goes, and
// the exit code still follows the verdicts, --fail-on and errors, including
// a path that cannot be read after output has begun.
func TestCheck_ExitCodesInEveryFormat(t *testing.T) {
	broken := writeFile(t, t.TempDir(), "broken.yaml", "kind: [\n")
	tests := []struct {
		name string
		args []string
		code int
		// want is in the output or the error.
		want string
	}{
		{"warnings pass at deny", []string{"../../examples/codartium-status-example.yaml"}, 0, "image-pinned"},
		{"warnings fail at warn", []string{"../../examples/codartium-status-example.yaml", "--fail-on", "warn"}, 1, "image-pinned"},
		{"deny", []string{"../../examples/node-exporter.yaml"}, 1, "control-plane-toleration"},
		{"unreadable document", []string{"../../examples/node-exporter.yaml", broken}, 2, "not valid YAML"},
		{"path missing after output began", []string{"../../examples/node-exporter.yaml", "no-such-file.yaml"}, 2, "no such file"},
	}
	for format := range checkFormats {
		for _, tt := range tests {
			t.Run(format+"/"+tt.name, func(t *testing.T) {
				out, err, code := runCLI(t, "", append([]string{"check", "-o", format}, tt.args...)...)
				if code != tt.code {
					t.Errorf("exit code = %d, want %d\n%s%v", code, tt.code, out, err)
				}
				if !strings.Contains(out+fmt.Sprint(err), tt.want) {
					t.Errorf("output lacks %q:\n%s%v", tt.want, out, err)
				}
			})
		}
	}
}

// TestCheck_Previous: with --previous, a DaemonSet is judged as an update of
// its namesake in the cluster, and rollout-impact says what it starts; one
// the file does not hold is a CREATE.
func TestCheck_Previous(t *testing.T) {
	const fixtures = "../../policy/rules/testdata/rules/rollout-impact/"
	out, err, _ := runCLI(t, "", "check", fixtures+"denied/new-image.yaml", "--previous", fixtures+"previous.yaml", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"rule": "rollout-impact"`) || !strings.Contains(out, "restarts the agent on 120 nodes, 12 at a time") {
		t.Errorf("no rollout-impact finding for a new image:\n%s", out)
	}
	data, err := os.ReadFile(fixtures + "denied/new-image.yaml")
	if err != nil {
		t.Fatal(err)
	}
	renamed := writeFile(t, t.TempDir(), "other.yaml", strings.Replace(string(data), "name: node-exporter\n", "name: other-exporter\n", 1))
	out, err, _ = runCLI(t, "", "check", renamed, "--previous", fixtures+"previous.yaml", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "rollout-impact") {
		t.Errorf("a DaemonSet --previous does not hold was judged as an update:\n%s", out)
	}
	if _, err, _ = runCLI(t, "", "check", renamed, "--previous", renamed+".missing"); err == nil {
		t.Error("an unreadable --previous is not an error")
	}
	// A manifest as --previous carries no status: rollout-impact has no Pods
	// to count, and the run says so instead of leaving the figures out
	// without a word.
	older := writeFile(t, t.TempDir(), "older.yaml", strings.Replace(string(data), "node-exporter:v1.10.0", "node-exporter:v1.9.1", 1))
	out, err, _ = runCLI(t, "", "check", fixtures+"denied/new-image.yaml", "--previous", older)
	if err != nil && !strings.Contains(err.Error(), "exit") {
		t.Fatal(err)
	}
	if strings.Contains(out, "restarts the agent") {
		t.Errorf("rollout figures from a --previous without status:\n%s", out)
	}
	for _, want := range []string{"note: --previous " + older + ": 1 of 1 DaemonSets carry no status (monitoring/node-exporter)",
		"kubectl get daemonsets -A -o yaml"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestCheck_CoverageMap: -o markdown and -o html lay the manifests'
// DaemonSets against the --nodes node set; without --nodes they refuse.
func TestCheck_CoverageMap(t *testing.T) {
	out, _, code := runCLI(t, "", "check", "-f", "../../examples/node-exporter.yaml", "-f", "../../examples/node-exporter-gpu.yaml",
		"--nodes", "../../examples/nodes.yaml", "-o", "markdown")
	if code != 1 {
		t.Errorf("exit %d, want 1: the exit code still follows the verdicts (node-exporter is denied)", code)
	}
	for _, want := range []string{
		"4 nodes, 2 DaemonSets (predicted from the manifests)",
		"| `monitoring/gpu-node-exporter` | 1 | 0 | 0 | 3: nodeSelector gpu=true |",
		"| `monitoring/node-exporter` | 3 | 0 | 0 | 1: taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("-o markdown lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runCLI(t, "", "check", "-f", "../../examples/node-exporter.yaml", "--nodes", "../../examples/nodes.yaml",
		"-o", "html", "--pool-label", "kubernetes.io/hostname")
	if !strings.HasPrefix(out, "<!DOCTYPE html>") || !strings.Contains(out, `data-nodes="cp-1"`) ||
		!strings.Contains(out, `<span class="pool">cp-1</span>`) {
		t.Errorf("-o html with --pool-label: not the page expected:\n%s", out)
	}
	if _, err, code := runCLI(t, "", "check", "-f", "../../examples/node-exporter.yaml", "-o", "html"); code != 2 ||
		err == nil || !strings.Contains(err.Error(), "--nodes") {
		t.Errorf("-o html without --nodes: exit %d, err %v; want 2 and a word on --nodes", code, err)
	}
}

// TestCheck_CoverageMapChange: -o markdown with --previous-nodes says how
// the manifests' coverage changes from one node set to the other; with
// --previous, how it changes from the DaemonSets as they stand.
func TestCheck_CoverageMapChange(t *testing.T) {
	dir := t.TempDir()
	nodes, err := os.ReadFile("../../examples/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// worker-3 loses its GPU label, which the GPU exporter selects.
	relabelled := strings.Replace(string(nodes), `kubernetes.io/arch: amd64, gpu: "true"}`, `kubernetes.io/arch: amd64}`, 1)
	if relabelled == string(nodes) {
		t.Fatal("examples/nodes.yaml changed: the test's edit no longer applies")
	}
	newNodes := writeFile(t, dir, "nodes-after.yaml", relabelled)
	out, _, _ := runCLI(t, "", "check", "-f", "../../examples/node-exporter-tolerations.yaml", "-f", "../../examples/node-exporter-gpu.yaml",
		"--previous-nodes", "../../examples/nodes.yaml", "--nodes", newNodes, "-o", "markdown")
	want := "| `monitoring/gpu-node-exporter` | 1 → 0 | 0 | 0 | **3 → 4: nodeSelector gpu=true** |"
	if !strings.Contains(out, want) || strings.Contains(out, "`monitoring/node-exporter`") {
		t.Errorf("--previous-nodes: want only the GPU exporter's row %q:\n%s", want, out)
	}
	out, _, _ = runCLI(t, "", "check", "-f", "../../examples/node-exporter-tolerations.yaml",
		"--previous-nodes", "../../examples/nodes.yaml", "--nodes", "../../examples/nodes.yaml", "-o", "markdown")
	if !strings.Contains(out, "No DaemonSet's coverage changes.") {
		t.Errorf("the same node set twice: want no change:\n%s", out)
	}
	// --previous: the stored node-exporter lacks the control-plane
	// toleration the manifest adds.
	out, _, _ = runCLI(t, "", "check", "-f", "../../examples/node-exporter-tolerations.yaml",
		"--previous", "../../examples/node-exporter.yaml", "--nodes", "../../examples/nodes.yaml", "-o", "markdown")
	want = "| `monitoring/node-exporter` | 3 → 4 | 0 | 0 | ~~1: taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated~~ |"
	if !strings.Contains(out, want) {
		t.Errorf("--previous: want %q:\n%s", want, out)
	}
	if _, err, code := runCLI(t, "", "check", "-f", "../../examples/node-exporter.yaml", "--nodes", newNodes,
		"--previous-nodes", "../../examples/nodes.yaml", "-o", "html"); code != 2 || err == nil {
		t.Errorf("--previous-nodes with -o html: exit %d, err %v; want 2", code, err)
	}
}

// TestCheck_ConflictsWithTheDumpsDaemonSets: a cluster dump that holds
// DaemonSets (kubectl get nodes,pods,...,daemonsets -A -o yaml) is what
// host-port-conflict and anti-affinity-conflict compare the manifests
// with; the dump's own copy of a manifest's DaemonSet is not a rival.
func TestCheck_ConflictsWithTheDumpsDaemonSets(t *testing.T) {
	const fixtures = "../../policy/rules/testdata/rules/"
	out, _, code := runCLI(t, "", "check", fixtures+"host-port-conflict/denied/same-port.yaml",
		fixtures+"anti-affinity-conflict/denied/exclusive.yaml", "--nodes", fixtures+"host-port-conflict/nodes.yaml", "-o", "wide")
	if code != 1 {
		t.Fatalf("exit code = %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		"DENY  host-port-conflict  spec.template.spec",
		"stays Pending on every node it covers (3): DaemonSet monitoring/node-exporter holds host port 9100/TCP on 3 nodes (worker-1, worker-2, worker-3)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q\n%s", want, out)
		}
	}
	// That dump has no net-agent: no anti-affinity conflict.
	if strings.Contains(out, "  anti-affinity-conflict  ") {
		t.Errorf("an anti-affinity conflict without the other DaemonSet in the dump:\n%s", out)
	}
	// Checked against a dump without DaemonSets, the same port is free.
	dump, err := os.ReadFile(fixtures + "host-port-conflict/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(dump, []byte("  - apiVersion: apps/v1\n    kind: DaemonSet"))
	j := bytes.Index(dump, []byte("  - apiVersion: v1\n    kind: Pod"))
	if i < 0 || j < i {
		t.Fatal("the fixture's dump changed shape")
	}
	without := writeFile(t, t.TempDir(), "cluster.yaml", string(dump[:i])+string(dump[j:]))
	out, _, _ = runCLI(t, "", "check", fixtures+"host-port-conflict/denied/same-port.yaml", "--nodes", without)
	if strings.Contains(out, "  host-port-conflict  ") {
		t.Errorf("a conflict without the other DaemonSet in the dump:\n%s", out)
	}
}

// TestCheck_SeveralOutputsInOneRun: -o FORMAT=FILE beside one format on
// stdout (or --output-file) gives each report byte for byte as a run of that
// format alone, with the same exit code.
func TestCheck_SeveralOutputsInOneRun(t *testing.T) {
	dir := t.TempDir()
	alone := map[string]string{}
	for _, format := range []string{"github", "sarif", "json", "junit", "text"} {
		out, _, code := runCLI(t, "", "check", "../../examples/", "-o", format)
		if code != 1 {
			t.Fatalf("-o %s alone: exit %d, want 1", format, code)
		}
		alone[format] = out
	}
	sarif, junit := filepath.Join(dir, "dsguard.sarif"), filepath.Join(dir, "report.xml")
	out, err, code := runCLI(t, "", "check", "../../examples/", "-o", "github", "-o", "sarif="+sarif, "-o", "junit="+junit)
	if code != 1 {
		t.Fatalf("three outputs: exit %d (%v), want 1", code, err)
	}
	textFile := filepath.Join(dir, "report.txt")
	stdout, _, code := runCLI(t, "", "check", "../../examples/", "-o", "json="+filepath.Join(dir, "r.json"), "-o", "text", "--output-file", textFile)
	if code != 1 || stdout != "" {
		t.Fatalf("--output-file: exit %d, stdout %q; want 1 and nothing on stdout", code, stdout)
	}
	for _, c := range []struct{ format, got string }{
		{"github", out}, {"sarif", readFile(t, sarif)}, {"junit", readFile(t, junit)},
		{"text", readFile(t, textFile)}, {"json", readFile(t, filepath.Join(dir, "r.json"))},
	} {
		if c.got != alone[c.format] {
			t.Errorf("-o %s in a run of several differs from a run of it alone:\n%s\nalone:\n%s", c.format, c.got, alone[c.format])
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseOutputs(t *testing.T) {
	for _, tc := range []struct {
		specs      []string
		outputFile string
		want       []output
		err        string
	}{
		{specs: nil, want: []output{{format: "text"}}},
		{specs: []string{"github", "sarif=a.sarif"}, want: []output{{format: "github"}, {format: "sarif", file: "a.sarif"}}},
		{specs: []string{"wide"}, outputFile: "r.txt", want: []output{{format: "wide", file: "r.txt"}}},
		{specs: []string{"github", "json"}, err: "one report at most goes to stdout"},
		{specs: []string{"sarif=a", "json=a"}, err: "two reports would be written to a"},
		{specs: []string{"json"}, outputFile: "a", want: []output{{format: "json", file: "a"}}},
		{specs: []string{"json=a"}, outputFile: "b", err: "every -o has its own"},
		{specs: []string{"yaml"}, err: `unknown output format "yaml"`},
		{specs: []string{"sarif="}, err: "no file after '='"},
	} {
		got, err := parseOutputs(tc.specs, tc.outputFile)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseOutputs(%q, %q): got %v, %v; want an error with %q", tc.specs, tc.outputFile, got, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("parseOutputs(%q, %q) = %v, %v; want %v", tc.specs, tc.outputFile, got, err, tc.want)
		}
	}
}
