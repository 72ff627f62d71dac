package check

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

const codescanFile = "testdata/codescan/deploy/agent.yaml"

// lineOf returns the 1-based line of the first line of file containing s,
// so that expectations follow the fixture if it is edited.
func lineOf(t *testing.T, file, s string) int {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), s) {
			return n
		}
	}
	t.Fatalf("%s has no line containing %q", file, s)
	return 0
}

func runCodescan(t *testing.T, failOn policy.Action) *Results {
	t.Helper()
	r, err := Run(Input{Paths: []string{"testdata/codescan"}, Env: policy.Env{Policy: rules.Builtin().Default(), Now: time.Now()}, Namespace: "default", FailOn: failOn})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWriteSARIF_ValidAgainstTheSchema(t *testing.T) {
	schemaFile, err := os.Open("testdata/sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	defer schemaFile.Close()
	doc, err := jsonschema.UnmarshalJSON(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("sarif-schema-2.1.0.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	// A report with findings, an unreadable document and notes.
	r := runCodescan(t, policy.ActionDeny)
	bad, err := Run(Input{Paths: []string{"-"}, Stdin: strings.NewReader("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\n"),
		Env: policy.Env{Policy: rules.Builtin().Default(), Now: time.Now()}, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	r.Errors = append(r.Errors, bad.Errors...)
	r.Notes = append(r.Notes, "a note")
	var out bytes.Buffer
	// Also a run stopped early, whose log ends with an error notification.
	for _, stopped := range []error{errors.New("stat missing.yaml: no such file or directory"), nil} {
		r.Stopped = stopped
		out.Reset()
		if err := WriteSARIF(&out, r, Tool{Version: "v1.2.3", Rules: rules.Builtin().Rules()}); err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Fatalf("SARIF output (stopped: %v) does not validate against the SARIF 2.1.0 schema: %v\n%s", stopped, err, out.String())
		}
	}
	// The schema must be able to fail: a log without its version is refused.
	var broken map[string]any
	if err := json.Unmarshal(out.Bytes(), &broken); err != nil {
		t.Fatal(err)
	}
	delete(broken, "version")
	if err := schema.Validate(broken); err == nil {
		t.Error("a SARIF log without version validated: the schema check cannot fail")
	}
}

// TestWriteSARIF_CodeScanning reads the SARIF as code scanning does: every
// result's file is the repository path and its line the one to change.
func TestWriteSARIF_CodeScanning(t *testing.T) {
	var out bytes.Buffer
	if err := WriteSARIF(&out, runCodescan(t, policy.ActionDeny), Tool{Rules: rules.Builtin().Rules()}); err != nil {
		t.Fatal(err)
	}
	var log struct {
		Runs []struct {
			Tool struct {
				Driver struct{ Rules []struct{ ID string } }
			}
			Results []struct {
				RuleID, Level string
				RuleIndex     int
				Locations     []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }
						Region           struct{ StartLine, StartColumn int }
					}
				}
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	run := log.Runs[0]
	for _, res := range run.Results {
		loc := res.Locations[0].PhysicalLocation
		if loc.ArtifactLocation.URI != codescanFile {
			t.Errorf("%s: uri %q, want %q", res.RuleID, loc.ArtifactLocation.URI, codescanFile)
		}
		if run.Tool.Driver.Rules[res.RuleIndex].ID != res.RuleID {
			t.Errorf("%s: ruleIndex %d names %s", res.RuleID, res.RuleIndex, run.Tool.Driver.Rules[res.RuleIndex].ID)
		}
		got[res.RuleID] = res.Level + "@" + itoa(loc.Region.StartLine) + ":" + itoa(loc.Region.StartColumn)
	}
	surge := lineOf(t, codescanFile, "maxSurge: 1")
	if g, w := got["surge-host-port"], "error@"+itoa(surge)+":17"; g != w {
		t.Errorf("surge-host-port at %s, want %s (the maxSurge line)", g, w)
	}
	if len(got) != 1 {
		t.Errorf("results %v, want only surge-host-port", got)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestWriteJUnit(t *testing.T) {
	for _, tt := range []struct {
		failOn   policy.Action
		failures int
	}{{policy.ActionDeny, 1}, {policy.ActionWarn, 1}} {
		var out bytes.Buffer
		if err := WriteJUnit(&out, runCodescan(t, tt.failOn)); err != nil {
			t.Fatal(err)
		}
		var suites junitSuites
		if err := xml.Unmarshal(out.Bytes(), &suites); err != nil {
			t.Fatalf("not XML: %v\n%s", err, out.String())
		}
		if suites.Tests != 1 || suites.Failures != tt.failures || len(suites.Suites) != 1 {
			t.Errorf("fail-on %s: tests %d failures %d, want 1 and %d\n%s", tt.failOn, suites.Tests, suites.Failures, tt.failures, out.String())
		}
		c := suites.Suites[0].Cases[0]
		if c.Name != "DaemonSet monitoring/agent" || c.Failure == nil || !strings.Contains(c.Failure.Text, "surge-host-port") {
			t.Errorf("test case = %+v", c)
		}
	}
}

func TestWriteGitHub(t *testing.T) {
	var out bytes.Buffer
	if err := WriteGitHub(&out, runCodescan(t, policy.ActionDeny)); err != nil {
		t.Fatal(err)
	}
	line := lineOf(t, codescanFile, "maxSurge: 1")
	want := "::error file=" + codescanFile + ",line=" + itoa(line) + ",col=17,title=dsguard surge-host-port::DaemonSet monitoring/agent: "
	if !strings.HasPrefix(out.String(), want) {
		t.Errorf("output does not start with\n%s\n%s", want, out.String())
	}
	if strings.Count(out.String(), "::error") != 1 || !strings.Contains(out.String(), "\ndsguard: checked 1 DaemonSet: 1 denied") {
		t.Errorf("want one annotation and the summary line:\n%s", out.String())
	}
	if got := ghProperty("a,b:c%\n"); got != "a%2Cb%3Ac%25%0A" {
		t.Errorf("ghProperty = %q", got)
	}
}

// TestRun_Stream: a streamed run hands each result on and keeps none, yet
// its summary and exit code are those of a run that keeps them.
func TestRun_Stream(t *testing.T) {
	kept := runCodescan(t, policy.ActionDeny)
	var streamed []string
	r, err := Run(Input{Paths: []string{"testdata/codescan"}, Env: policy.Env{Policy: rules.Builtin().Default(), Now: time.Now()},
		Namespace: "default", Stream: func(res *Result) error {
			streamed = append(streamed, res.Namespace+"/"+res.Name+":"+string(res.Verdict()))
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results) != 0 || strings.Join(streamed, ",") != "monitoring/agent:deny" {
		t.Errorf("kept %d results, streamed %v; want none kept and monitoring/agent:deny streamed", len(r.Results), streamed)
	}
	if r.Summary() != kept.Summary() || r.ExitCode() != kept.ExitCode() || r.ExitCode() != ExitDenied {
		t.Errorf("streamed summary %+v exit %d, kept %+v exit %d", r.Summary(), r.ExitCode(), kept.Summary(), kept.ExitCode())
	}
}

// A release's SARIF links the rules' documentation at its own tag.
func TestRulesDocURI(t *testing.T) {
	for version, want := range map[string]string{
		"1.2.3":                  "https://github.com/dsguard/dsguard/blob/v1.2.3/docs/rules.md",
		"v1.2.3":                 "https://github.com/dsguard/dsguard/blob/v1.2.3/docs/rules.md",
		"0.2.0-rc.1":             "https://github.com/dsguard/dsguard/blob/v0.2.0-rc.1/docs/rules.md",
		"dev":                    "https://github.com/dsguard/dsguard/blob/main/docs/rules.md",
		"4a149f6":                "https://github.com/dsguard/dsguard/blob/main/docs/rules.md",
		"1.2.3-dirty ":           "https://github.com/dsguard/dsguard/blob/main/docs/rules.md",
		"0.1.0-3-g4a149f6-dirty": "https://github.com/dsguard/dsguard/blob/main/docs/rules.md",
		"0.1.0-12-gdeadbee":      "https://github.com/dsguard/dsguard/blob/main/docs/rules.md",
	} {
		if got := rulesDocURI(version); got != want {
			t.Errorf("rulesDocURI(%q) = %s, want %s", version, got, want)
		}
	}
}
