package testrun

import (
	"bytes"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/check"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// agent is a DaemonSet that draws a readiness-probe warning and an
// image-pinned warning from the default policy, and nothing else offline.
const agent = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: monitoring}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      tolerations: [{operator: Exists}]
      containers:
        - name: agent
          image: example.com/agent:latest
`

// defaultRunner judges with the built-in default policy; a test's nodes,
// policy and previous files are not read.
func defaultRunner() *Runner {
	return &Runner{Registry: rules.Builtin(), Prepare: func(in Inputs) (check.Input, error) {
		return check.Input{Namespace: in.Namespace, Env: policy.Env{Policy: rules.Builtin().Default(), Now: testobj.Now}}, nil
	}}
}

// writeTest writes files (name → content) into a new folder and returns it.
func writeTest(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const header = "apiVersion: dsguard.io/v1alpha1\nkind: Test\nmanifests: [ds/*.yaml]\n"

func TestRun_ComparesEachExpectation(t *testing.T) {
	dir := writeTest(t, map[string]string{"ds/agent.yaml": agent, FileName: header + `expect:
  - {daemonSet: monitoring/agent, rule: image-pinned, result: warn}
  - {daemonSet: monitoring/agent, rule: privileged, result: pass}
  - {daemonSet: monitoring/agent, rule: readiness-probe, result: pass}
`})
	rep, err := defaultRunner().Run([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cases) != 3 || rep.Failed() != 1 || rep.ExitCode() != ExitFailed {
		t.Fatalf("cases %d, failed %d, exit %d; want 3, 1, 1: %+v", len(rep.Cases), rep.Failed(), rep.ExitCode(), rep.Cases)
	}
	c := rep.Cases[2]
	if c.Passed || c.Rule != "readiness-probe" || c.Got != ResultWarn || c.DaemonSet != "monitoring/agent" || len(c.Findings) != 1 {
		t.Errorf("the readiness-probe case: %+v", c)
	}
	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"TEST FILE", "readiness-probe  pass      warn  FAIL",
		"FAIL " + filepath.Join(dir, FileName) + ": monitoring/agent readiness-probe: expected pass, got warn",
		"  WARN readiness-probe spec.template.spec.containers[0].readinessProbe: ",
		"3 tests in 1 file: 2 passed, 1 failed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRun_InvalidInput(t *testing.T) {
	for _, tc := range []struct {
		name, test string
		files      map[string]string
		want       []string
	}{
		{
			name: "every problem of the file, with its line",
			test: `apiVersion: dsguard.io/v1alpha1
kind: Tests
manifests: [ds/*.yaml]
now: yesterday
expect:
  - daemonSet: monitoring/agent
    rule: privilegd
    result: deny
  - daemonSet: monitoring/agent
    rule: privileged
    result: denied
  - daemonSet: monitoring/agent
    rule: node-coverage
    result: deny
  - daemonSet: monitoring/agent
    rule: node-change
    result: pass
  - daemonSet: monitoring/agent
    rule: privileged
    result: pass
    nodes: [a]
`,
			want: []string{
				"invalid test file:",
				`line 2: kind: Unsupported value: "Tests": supported values: "Test"`,
				`line 4: now: Invalid value: "yesterday"`,
				`line 7: expect[0].rule: Unsupported value: "privilegd": supported values: "control-plane-toleration"`,
				`line 11: expect[1].result: Unsupported value: "denied": supported values: "deny", "warn", "audit", "pass"`,
				`line 13: expect[2].rule: Invalid value: "node-coverage": the rule needs the node set`,
				`line 16: expect[3].rule: Invalid value: "node-change": the rule judges a change to a Node`,
				`line 21: expect[4].nodes: Invalid value: "[a]": a rule that passes names no node`,
			},
		},
		{
			name: "an unknown key",
			test: header + "expect:\n  - daemonSet: monitoring/agent\n    rule: privileged\n    reslt: pass\n",
			want: []string{`line 7: unknown field "reslt"`},
		},
		{
			name: "a DaemonSet the manifests do not hold, beside the file's own problems",
			test: header + "expect:\n  - {daemonSet: monitoring/agnt, rule: privileged, result: pass}\n  - {daemonSet: agent, rule: privileged, result: pass}\n" +
				"  - {daemonSet: monitoring/agent, rule: privileged, result: fail}\n",
			want: []string{`line 5: expect[0].daemonSet: Invalid value: "monitoring/agnt": not among the DaemonSets of the manifests (they hold monitoring/agent)` + "\n" +
				`  line 6: expect[1].daemonSet: Invalid value: "default/agent"`,
				`line 7: expect[2].result: Unsupported value: "fail"`},
		},
		{
			name:  "a DaemonSet held twice, and a file that holds none of it",
			files: map[string]string{"ds/again.yaml": agent},
			test: header + "expect:\n  - {daemonSet: monitoring/agent, rule: privileged, result: pass}\n" +
				"  - {daemonSet: monitoring/agent, file: ds/other.yaml, rule: privileged, result: pass}\n" +
				"  - {daemonSet: monitoring/agent, file: ds/again.yaml, rule: privileged, result: pass}\n",
			want: []string{`expect[0].daemonSet: Invalid value: "monitoring/agent": the manifests hold it more than once (ds/again.yaml document 1, ds/agent.yaml document 1): say which with file`,
				`expect[1].file: Invalid value: "ds/other.yaml": holds no DaemonSet monitoring/agent`},
		},
		{
			name: "manifests that name nothing",
			test: "apiVersion: dsguard.io/v1alpha1\nkind: Test\nmanifests: [nothing/*.yaml, gone.yaml]\nexpect:\n  - {daemonSet: a, rule: privileged, result: pass}\n",
			want: []string{`line 3: manifests[0]: Invalid value: "nothing/*.yaml": the glob matches no file`,
				`manifests[1]: Invalid value: "gone.yaml": no such file or directory`},
		},
		{
			name: "no expectations",
			test: header,
			want: []string{"expect: Required value"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"ds/agent.yaml": agent, FileName: tc.test}
			for k, v := range tc.files {
				files[k] = v
			}
			dir := writeTest(t, files)
			rep, err := defaultRunner().Run([]string{dir})
			if err == nil {
				t.Fatalf("no error; report %+v", rep)
			}
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Errorf("error is not an InputError: %v", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

func TestDiscover(t *testing.T) {
	dir := writeTest(t, map[string]string{"a/" + FileName: "", "b/c/dsguard-test.yml": "", "b/other.yaml": "", ".git/" + FileName: ""})
	got, err := Discover([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a", FileName), filepath.Join(dir, "b", "c", "dsguard-test.yml")}
	if !slices.Equal(got, want) {
		t.Errorf("Discover = %v, want %v", got, want)
	}
	if got, err := Discover([]string{want[0]}); err != nil || !slices.Equal(got, want[:1]) {
		t.Errorf("a file is taken as given: %v, %v", got, err)
	}
	if _, err := Discover([]string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no "+FileName+" under") {
		t.Errorf("a folder without tests: %v", err)
	}
}

func TestMentions(t *testing.T) {
	for _, tc := range []struct {
		text, name string
		want       bool
	}{
		{"skips cp-1 (1 of 5 nodes)", "cp-1", true},
		{"not tolerated (cp-1)", "cp-1", true},
		{"skips cp-1.", "cp-1", true},
		{"skips cp-10", "cp-1", false},
		{"skips xcp-1", "cp-1", false},
		{"skips cp-1.example.com", "cp-1", false},
		{"skips cp-1.example.com", "cp-1.example.com", true},
		{"cp-1", "cp-1", true},
		{"skips cp-10 and cp-1", "cp-1", true},
		{"", "cp-1", false},
	} {
		if got := mentions(tc.text, tc.name); got != tc.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", tc.text, tc.name, got, tc.want)
		}
	}
}

func TestResultOf(t *testing.T) {
	f := func(a policy.Action) policy.Finding { return policy.Finding{Action: a} }
	for _, tc := range []struct {
		fs   []policy.Finding
		want Result
	}{
		{nil, ResultPass},
		{[]policy.Finding{f(policy.ActionAudit)}, ResultAudit},
		{[]policy.Finding{f(policy.ActionAudit), f(policy.ActionWarn)}, ResultWarn},
		{[]policy.Finding{f(policy.ActionWarn), f(policy.ActionAudit)}, ResultWarn},
		{[]policy.Finding{f(policy.ActionWarn), f(policy.ActionDeny)}, ResultDeny},
	} {
		if got := resultOf(tc.fs); got != tc.want {
			t.Errorf("resultOf(%v) = %s, want %s", tc.fs, got, tc.want)
		}
	}
}

func TestWriteJUnit_ReadsBack(t *testing.T) {
	dir := writeTest(t, map[string]string{"ds/agent.yaml": agent, FileName: header + `expect:
  - {daemonSet: monitoring/agent, rule: image-pinned, result: warn}
  - {daemonSet: monitoring/agent, rule: readiness-probe, result: pass}
`})
	rep, err := defaultRunner().Run([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteJUnit(&out, rep); err != nil {
		t.Fatal(err)
	}
	var doc JUnitSuites
	if err := xml.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, out.String())
	}
	if doc.Tests != 2 || doc.Failures != 1 || len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 2 || doc.Suites[0].Failures != 1 {
		t.Fatalf("counts: %+v", doc)
	}
	pass, fail := doc.Suites[0].Cases[0], doc.Suites[0].Cases[1]
	if pass.Failure != nil || !strings.Contains(pass.SystemOut, "WARN image-pinned") {
		t.Errorf("the passing case: %+v", pass)
	}
	if fail.Failure == nil || fail.Failure.Message != "expected pass, got warn" || fail.Failure.Type != "warn" ||
		!strings.Contains(fail.Failure.Text, "WARN readiness-probe spec.template.spec.containers[0].readinessProbe: ") ||
		fail.Name != "monitoring/agent readiness-probe pass" || fail.Classname != filepath.Join(dir, FileName) {
		t.Errorf("the failing case: %+v", fail)
	}
}
