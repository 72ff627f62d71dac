package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/render"
)

// TestCheck_Inputs runs check on this repository's chart, a kustomize
// overlay and a tree mixing Kubernetes and other YAML, as a CI job would.
func TestCheck_Inputs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return writeFile(t, dir, name, content) }
	noSelector := write("no-selector.yaml", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: bare}\nspec:\n  template:\n    spec:\n      containers: [{name: a, image: a:1}]\n")
	mismatch := write("mismatch.yaml", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: m}\nspec:\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: b}}\n    spec:\n      containers: [{name: a, image: a:1}]\n")
	// A chart with a DaemonSet template (not valid YAML alone), as a
	// pre-commit hook passes its files: the template, the values.
	chart := filepath.Join(dir, "agent")
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("agent/Chart.yaml", "apiVersion: v2\nname: agent\nversion: 0.1.0\n")
	values := write("agent/values.yaml", "hostPort: 9100\n")
	template := write("agent/templates/daemonset.yaml", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: {{ .Release.Name }}-agent\n"+
		"spec:\n  selector: {matchLabels: {app: agent}}\n  updateStrategy:\n    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}\n"+
		"  template:\n    metadata: {labels: {app: agent}}\n    spec:\n      containers:\n        - name: agent\n          image: agent:1\n"+
		"          ports: [{containerPort: 9100, hostPort: {{ .Values.hostPort }}}]\n")
	tests := []struct {
		name string
		args []string
		code int
		want []string
		// chart: a build without Helm (-tags norender) refuses the input
		// instead, with render.ErrNoCharts.
		chart bool
	}{
		{
			name:  "this repository's chart renders, and holds no DaemonSet",
			args:  []string{"check", "../../charts/dsguard"},
			chart: true,
			code:  0,
			want:  []string{"checked 0 DaemonSets", "note: rendered with helm: ../../charts/dsguard", "note: no DaemonSet among"},
		},
		{
			name:  "chart values reach the rendering",
			args:  []string{"check", "../../charts/dsguard", "--set", "replicaCount=zero"},
			chart: true,
			code:  2,
			want:  []string{"replicaCount"},
		},
		{
			name:  "a chart's template and values passed as files (a pre-commit hook) render their chart, once",
			args:  []string{"check", "--allow-empty", template, values},
			chart: true,
			code:  1,
			want: []string{"note: rendered with helm: " + chart, "checked 1 DaemonSet in 1 file", "DENY  surge-host-port",
				"agent/templates/daemonset.yaml: document 1 (rendered by helm): DaemonSet default/release-name-agent: deny"},
		},
		{
			name: "kustomize overlay: the production patch adds a host port to a surge rollout",
			args: []string{"check", "../../render/testdata/kustomize/overlays/production"},
			code: 1,
			want: []string{
				"../../render/testdata/kustomize/overlays/production: document 1 (rendered by kustomize): DaemonSet logging/log-agent: deny",
				"DENY  surge-host-port  spec.updateStrategy.rollingUpdate.maxSurge",
			},
		},
		{
			name: "kustomize base passes",
			args: []string{"check", "../../render/testdata/kustomize/base"},
			code: 0,
			want: []string{"DaemonSet default/log-agent: pass", "1 passed"},
		},
		{
			name: "mixed tree: manifests judged, other YAML skipped with a note, hidden folders unread",
			args: []string{"check", "testdata/mixed"},
			code: 0,
			want: []string{
				"testdata/mixed/deploy/agent.yaml: document 2: DaemonSet monitoring/agent: warn",
				"WARN  readiness-probe",
				"1 object of other kinds skipped",
				"note: testdata/mixed/ci/pipeline.yml: not a Kubernetes manifest, skipped",
				"note: testdata/mixed/values.yaml: not a Kubernetes manifest, skipped",
			},
		},
		{
			name: "--fail-on warn fails on warnings",
			args: []string{"check", "testdata/mixed", "--fail-on", "warn"},
			code: 1,
			want: []string{"1 with warnings"},
		},
		{
			name: "positional paths and -f together",
			args: []string{"check", "../../examples/node-exporter-tolerations.yaml", "-f", "../../examples/node-exporter.yaml"},
			code: 1,
			want: []string{"checked 2 DaemonSets in 2 files: 1 denied"},
		},
		{name: "no Kubernetes object is not a pass", args: []string{"check", "testdata/empty"}, code: 2, want: []string{"no Kubernetes objects found in testdata/empty"}},
		{name: "--allow-empty lets a hook pass files that hold no manifest", args: []string{"check", "--allow-empty", "testdata/mixed/values.yaml"}, code: 0, want: []string{"note: no Kubernetes objects found"}},
		{name: "empty stdin is not a pass", args: []string{"check", "-"}, code: 2, want: []string{"no Kubernetes objects found in -"}},
		{
			name: "a DaemonSet the API server would refuse is an error naming the file",
			args: []string{"check", noSelector, mismatch},
			code: 2,
			want: []string{
				"no-selector.yaml: document 1: error: DaemonSet bare: the API server would refuse it: spec.selector: Required value",
				"mismatch.yaml: document 1: error: DaemonSet m: the API server would refuse it: spec.template.metadata.labels: Invalid value",
			},
		},
		{name: "bad --fail-on", args: []string{"check", "testdata/mixed", "--fail-on", "audit"}, code: 2, want: []string{"unknown --fail-on"}},
	}
	for _, tt := range tests {
		if tt.chart && !render.ChartsRendered {
			tt.code, tt.want = 2, []string{render.ErrNoCharts.Error()}
		}
		t.Run(tt.name, func(t *testing.T) {
			out, err, code := runCLI(t, "", tt.args...)
			text := out
			if err != nil {
				text += err.Error()
			}
			if code != tt.code {
				t.Errorf("exit code = %d, want %d\n%s", code, tt.code, text)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

// TestCheck_Placement: with --nodes, -o wide and -o json say where each
// DaemonSet runs and why it skips every other node.
func TestCheck_Placement(t *testing.T) {
	out, _, code := runCLI(t, "", "check", "../../examples/node-exporter.yaml", "--nodes", "../../examples/nodes.yaml", "-o", "wide")
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"  runs on 3 of 4 nodes: ",
		"  skips 1: taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated: cp-1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("-o wide lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runCLI(t, "", "check", "../../examples/node-exporter.yaml", "--nodes", "../../examples/nodes.yaml", "-o", "json")
	var rep struct {
		Results []struct {
			Findings []struct {
				Rule         string
				Line, Column int
			}
			Placement struct {
				Nodes, RunsOn, Skipped int
				RunsOnNodes            []string
				Skips                  []struct {
					Kind, Reason string
					Count        int
					Nodes        []string
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	p := rep.Results[0].Placement
	if p.Nodes != 4 || p.RunsOn != 3 || p.Skipped != 1 || len(p.RunsOnNodes) != 3 || len(p.Skips) != 1 ||
		p.Skips[0].Kind != "taint" || strings.Join(p.Skips[0].Nodes, ",") != "cp-1" || p.Skips[0].Count != 1 {
		t.Errorf("placement = %+v", p)
	}
	if f := rep.Results[0].Findings[0]; f.Rule != "control-plane-toleration" || f.Line == 0 || f.Column == 0 {
		t.Errorf("first finding %+v: want control-plane-toleration with a line and column", f)
	}
}

func TestVersion(t *testing.T) {
	out, err, _ := runCLI(t, "", "version")
	if err != nil || !strings.HasPrefix(out, "dsguard ") {
		t.Errorf("version = %q, %v", out, err)
	}
	out, err, _ = runCLI(t, "", "--version")
	if err != nil || !strings.HasPrefix(out, "dsguard ") {
		t.Errorf("--version = %q, %v", out, err)
	}
	version = "v9.8.7"
	defer func() { version = "" }()
	if got := versionString(); got != "v9.8.7" {
		t.Errorf("stamped version = %q", got)
	}
}

func TestAsKubectlPlugin(t *testing.T) {
	for arg0, want := range map[string]bool{"/usr/local/bin/kubectl-dsguard": true, "dsguard": false, "./bin/dsguard": false} {
		if got := asKubectlPlugin(arg0); got != want {
			t.Errorf("asKubectlPlugin(%q) = %v", arg0, got)
		}
	}
}
