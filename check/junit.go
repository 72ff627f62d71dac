package check

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/dsguard/dsguard/policy"
)

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Line      int           `xml:"line,attr,omitempty"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit renders the report as JUnit XML for CI systems that show test
// results: one test case per DaemonSet, failed when it fails at r.FailOn
// (its findings in the failure), warnings below that in system-out, and one
// errored case per document that could not be read.
func WriteJUnit(w io.Writer, r *Results) error {
	suite := junitSuite{Name: "dsguard check"}
	for i := range r.Results {
		res := &r.Results[i]
		c := junitCase{Name: "DaemonSet " + res.Namespace + "/" + res.Name, Classname: res.Location.File,
			File: res.Location.File, Line: res.Location.Line}
		var lines []string
		for j, f := range res.Findings {
			if f.Action != policy.ActionDeny && f.Action != policy.ActionWarn {
				continue
			}
			at := ""
			if j < len(res.Positions) && res.Positions[j].Line > 0 {
				at = fmt.Sprintf(" (line %d)", res.Positions[j].Line)
			}
			lines = append(lines, fmt.Sprintf("%s %s %s%s: %s\n  fix: %s",
				strings.ToUpper(string(f.Action)), f.RuleID, f.FieldString(), at, f.Message, f.Remediation))
		}
		switch {
		case res.Fails(r.FailOn):
			suite.Failures++
			c.Failure = &junitProblem{Type: string(res.Verdict()),
				Message: fmt.Sprintf("%s: %d deny, %d warn", res.Verdict(), policy.Count(res.Findings, policy.ActionDeny),
					policy.Count(res.Findings, policy.ActionWarn)),
				Text: strings.Join(lines, "\n")}
		case len(lines) > 0:
			c.SystemOut = strings.Join(lines, "\n")
		}
		suite.Cases = append(suite.Cases, c)
	}
	for _, e := range r.Errors {
		suite.Errors++
		suite.Cases = append(suite.Cases, junitCase{Name: e.Location.String(), Classname: e.Location.File,
			File: e.Location.File, Line: e.Location.Line,
			Error: &junitProblem{Type: "unreadable", Message: e.Err.Error(), Text: e.Error()}})
	}
	suite.Tests = len(suite.Cases)
	out := junitSuites{Name: "dsguard", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors,
		Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
