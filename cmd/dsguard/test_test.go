package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/dsguard/dsguard/testrun"
)

// ruleFixtures holds one folder per rule with allowed/ and denied/
// manifests and the rule's dsguard-test.yaml; allDenyPolicy is the policy
// those test files name.
const (
	ruleFixtures  = "../../policy/rules/testdata/rules"
	allDenyPolicy = "../../policy/rules/testdata/all-deny-policy.yaml"
)

// testReport is what the tests read of dsguard test -o json.
type testReport struct {
	Kind    string
	Results []struct {
		File, DaemonSet, Manifest, Rule, Expected, Got string
		Passed                                         bool
		Findings                                       []struct{ Rule, Action, Message string }
	}
	Summary struct{ Files, Tests, Passed, Failed int }
}

func runTestJSON(t *testing.T, wantCode int, args ...string) testReport {
	t.Helper()
	out, err, code := runCLI(t, "", append([]string{"test", "-o", "json"}, args...)...)
	if code != wantCode {
		t.Fatalf("dsguard test %v: exit %d (%v), want %d\n%s", args, code, err, wantCode, out)
	}
	var rep testReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Kind != "TestReport" {
		t.Fatalf("not a TestReport (%v):\n%s", err, out)
	}
	return rep
}

// TestTest_RuleFixtures runs every rule's fixtures through dsguard test:
// every rule that check judges has a test file, each allowed fixture must
// pass the rule and each denied one be denied by it, and all of them hold.
func TestTest_RuleFixtures(t *testing.T) {
	rep := runTestJSON(t, 0, ruleFixtures)
	if rep.Summary.Failed != 0 || rep.Summary.Tests == 0 || rep.Summary.Passed != rep.Summary.Tests {
		t.Fatalf("summary %+v, want every test passed", rep.Summary)
	}
	type key struct{ rule, manifest, expected string }
	cases := map[key]bool{}
	for _, r := range rep.Results {
		cases[key{r.Rule, filepath.Clean(r.Manifest), r.Expected}] = true
	}
	for _, r := range rules.Builtin().Rules() {
		if r.OnNodeChange {
			// check, and so test, never judge a node change: the rule's
			// fixtures run in TestRuleFixtures and through dsguard taint.
			continue
		}
		t.Run(r.ID, func(t *testing.T) {
			n := 0
			for verdict, expected := range map[string]string{"allowed": "pass", "denied": "deny"} {
				files, err := filepath.Glob(filepath.Join(ruleFixtures, r.ID, verdict, "*.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range files {
					if filepath.Base(f) == "expect.yaml" {
						continue
					}
					n++
					if !cases[key{r.ID, filepath.Clean(f), expected}] {
						t.Errorf("%s: no expectation that %s gives it %s in %s", f, r.ID, expected,
							filepath.Join(ruleFixtures, r.ID, testrun.FileName))
					}
				}
			}
			if n == 0 {
				t.Errorf("rule %s has no test", r.ID)
			}
		})
	}
}

// TestTest_AllDenyPolicy keeps the fixtures' policy whole: every rule of the
// catalogue denies under it, also a rule added later.
func TestTest_AllDenyPolicy(t *testing.T) {
	p, err := loadPolicy(allDenyPolicy, "policy.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules.Builtin().Rules() {
		if a, _ := p.RuleAction(r.ID); a != policy.ActionDeny {
			t.Errorf("%s: rule %s has action %q, want deny", allDenyPolicy, r.ID, a)
		}
	}
}

// wrongFixtures copies the rule fixtures and turns the last expectation of
// every test file (a denied fixture's deny) into pass, and returns the copy and
// how many test files it holds.
func wrongFixtures(t *testing.T) (string, int) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "testdata")
	if err := os.CopyFS(filepath.Join(dir, "rules"), os.DirFS(ruleFixtures)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(allDenyPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(allDenyPolicy)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := testrun.Discover([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		expect := child(t, doc.Content[0], "expect")
		entry := expect.Content[len(expect.Content)-1]
		result := child(t, entry, "result")
		if result.Value != "deny" {
			t.Fatalf("%s: the last expectation is %s, want a denied fixture's deny", f, result.Value)
		}
		result.Value = "pass"
		// A pass names no node.
		for i := 0; i+1 < len(entry.Content); i += 2 {
			if entry.Content[i].Value == "nodes" {
				entry.Content = append(entry.Content[:i], entry.Content[i+2:]...)
				break
			}
		}
		if data, err = yaml.Marshal(&doc); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, len(files)
}

// child is the value of key in a YAML mapping.
func child(t *testing.T, m *yaml.Node, key string) *yaml.Node {
	t.Helper()
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	t.Fatalf("no %s at line %d", key, m.Line)
	return nil
}

// TestTest_WrongExpectationFails: one wrong expectation per rule's test
// file fails the run with exit 1 and a FAIL row naming that rule, and
// nothing else fails.
func TestTest_WrongExpectationFails(t *testing.T) {
	dir, files := wrongFixtures(t)
	out, _, code := runCLI(t, "", "test", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	failed := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[len(fields)-1] != "FAIL" || !strings.HasPrefix(fields[0], dir) {
			continue
		}
		// TEST FILE, DAEMONSET (MANIFEST), RULE, EXPECTED, GOT, RESULT
		rule := filepath.Base(filepath.Dir(fields[0]))
		if fields[3] != rule || fields[4] != "pass" || fields[5] != "deny" {
			t.Errorf("FAIL row does not name its rule %s expected pass, got deny: %q", rule, line)
		}
		failed[rule] = true
	}
	if len(failed) != files {
		t.Errorf("%d rules with a FAIL row, want %d (one per test file):\n%s", len(failed), files, out)
	}
	for _, want := range []string{"\nFAIL " + dir, ": expected pass, got deny\n  DENY ", " failed\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rep := runTestJSON(t, 1, dir)
	if rep.Summary.Failed != files || rep.Summary.Files != files {
		t.Errorf("summary %+v, want %d files and as many failures", rep.Summary, files)
	}
}

// TestTest_JUnit reads the JUnit XML back: one suite per test file, one
// case per expectation, each failure with dsguard's deny message.
func TestTest_JUnit(t *testing.T) {
	dir, files := wrongFixtures(t)
	rep := runTestJSON(t, 1, dir)
	out, _, code := runCLI(t, "", "test", dir, "-o", "junit")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	var doc testrun.JUnitSuites
	if err := xml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, out)
	}
	if doc.Tests != rep.Summary.Tests || doc.Failures != files || len(doc.Suites) != files {
		t.Fatalf("tests %d, failures %d, suites %d; want %d, %d, %d", doc.Tests, doc.Failures, len(doc.Suites), rep.Summary.Tests, files, files)
	}
	cases := 0
	for _, s := range doc.Suites {
		rule := filepath.Base(filepath.Dir(s.Name))
		cases += len(s.Cases)
		if s.Failures != 1 || s.Tests != len(s.Cases) {
			t.Errorf("suite %s: %d failures in %d tests (%d cases), want 1", s.Name, s.Failures, s.Tests, len(s.Cases))
		}
		for _, c := range s.Cases {
			if c.Failure == nil {
				continue
			}
			if c.Failure.Message != "expected pass, got deny" || c.Failure.Type != "deny" ||
				!strings.Contains(c.Failure.Text, "DENY "+rule+" ") || !strings.Contains(c.Name, " "+rule+" pass") {
				t.Errorf("suite %s: failure %+v", s.Name, c)
			}
			// The message is dsguard's own, as -o json has it.
			for _, r := range rep.Results {
				if !r.Passed && r.File == s.Name && !strings.Contains(c.Failure.Text, r.Findings[0].Message) {
					t.Errorf("suite %s: failure text lacks %q", s.Name, r.Findings[0].Message)
				}
			}
		}
	}
	if cases != doc.Tests {
		t.Errorf("%d cases, tests=%d", cases, doc.Tests)
	}
}

func TestTest_ExampleAndExitCodes(t *testing.T) {
	out, _, code := runCLI(t, "", "test", "../../examples/tests")
	if code != 0 || !strings.Contains(out, "4 tests in 1 file: 4 passed, 0 failed") ||
		!strings.Contains(out, "control-plane-toleration  deny (cp-1)  deny (cp-1)  PASS") {
		t.Errorf("examples/tests: exit %d\n%s", code, out)
	}
	dir := t.TempDir()
	writeFile(t, dir, "ds.yaml", readFile(t, "../../examples/node-exporter.yaml"))
	bad := writeFile(t, dir, testrun.FileName, "apiVersion: dsguard.io/v1alpha1\nkind: Test\nmanifests: [ds.yaml]\nexpect:\n"+
		"  - {daemonSet: monitoring/node-exporter, rule: control-plane-toleraton, result: deny}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"test", bad}, `line 5: expect[0].rule: Unsupported value: "control-plane-toleraton"`},
		{[]string{"test", "../../examples/tests", "-o", "xml"}, `unknown output format "xml" (want json, junit, text)`},
		{[]string{"test", filepath.Join(dir, "missing")}, "no such file or directory"},
	} {
		out, err, code := runCLI(t, "", tc.args...)
		if code != 2 || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: exit %d, error %v, want 2 and %q\n%s", tc.args, code, err, tc.want, out)
		}
	}
}
