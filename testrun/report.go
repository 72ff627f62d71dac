package testrun

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dsguard/dsguard/policy"
)

// Formats are the -o values of dsguard test.
var Formats = map[string]func(io.Writer, *Report) error{
	"text":  WriteText,
	"json":  WriteJSON,
	"junit": WriteJUnit,
}

// verdict is a result as the table shows it, with the nodes named when the
// expectation names nodes.
func verdict(r Result, nodes []string) string {
	switch {
	case nodes == nil:
		return string(r)
	case len(nodes) == 0:
		return string(r) + " (no node)"
	}
	return string(r) + " (" + strings.Join(nodes, ", ") + ")"
}

// daemonSet is the case's DaemonSet, with the manifest when the
// expectation names it.
func (c *Case) daemonSet() string {
	if c.In == "" {
		return c.DaemonSet
	}
	return c.DaemonSet + " (" + c.In + ")"
}

// status is PASS or FAIL.
func (c *Case) status() string {
	if c.Passed {
		return "PASS"
	}
	return "FAIL"
}

// difference says how a failed case differs from its expectation.
func (c *Case) difference() string {
	return fmt.Sprintf("expected %s, got %s", verdict(c.Expected, c.ExpectedNodes), verdict(c.Got, c.GotNodes))
}

// findingLines are the rule's findings as dsguard gave them, one a line.
func (c *Case) findingLines() []string {
	if len(c.Findings) == 0 {
		return []string{"no finding from " + c.Rule}
	}
	out := make([]string, len(c.Findings))
	for i, f := range c.Findings {
		out[i] = fmt.Sprintf("%s %s %s: %s", strings.ToUpper(string(f.Action)), f.RuleID, f.FieldString(), f.Message)
	}
	return out
}

// summary is the last line of the text report.
func (r *Report) summary() string {
	files := "1 file"
	if len(r.Files) != 1 {
		files = fmt.Sprintf("%d files", len(r.Files))
	}
	return fmt.Sprintf("%d tests in %s: %d passed, %d failed", len(r.Cases), files, len(r.Cases)-r.Failed(), r.Failed())
}

// WriteText writes the report as a table, one row per case, then each
// failure with the findings dsguard gave, then a summary line.
func WriteText(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TEST FILE\tDAEMONSET\tRULE\tEXPECTED\tGOT\tRESULT")
	for i := range r.Cases {
		c := &r.Cases[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.File, c.daemonSet(), c.Rule, verdict(c.Expected, c.ExpectedNodes),
			verdict(c.Got, c.GotNodes), c.status())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	for i := range r.Cases {
		c := &r.Cases[i]
		if c.Passed {
			continue
		}
		fmt.Fprintf(&b, "\nFAIL %s: %s %s: %s\n", c.File, c.daemonSet(), c.Rule, c.difference())
		for _, l := range c.findingLines() {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	fmt.Fprintf(&b, "\n%s\n", r.summary())
	_, err := io.WriteString(w, b.String())
	return err
}

// jsonCase is a case in -o json.
type jsonCase struct {
	File          string           `json:"file"`
	DaemonSet     string           `json:"daemonSet"`
	Manifest      string           `json:"manifest"`
	Rule          string           `json:"rule"`
	Expected      Result           `json:"expected"`
	ExpectedNodes []string         `json:"expectedNodes,omitempty"`
	Got           Result           `json:"got"`
	GotNodes      []string         `json:"gotNodes,omitempty"`
	Passed        bool             `json:"passed"`
	Findings      []policy.Finding `json:"findings"`
}

// WriteJSON writes the report as a TestReport document.
func WriteJSON(w io.Writer, r *Report) error {
	doc := struct {
		APIVersion string     `json:"apiVersion"`
		Kind       string     `json:"kind"`
		Results    []jsonCase `json:"results"`
		Summary    struct {
			Files  int `json:"files"`
			Tests  int `json:"tests"`
			Passed int `json:"passed"`
			Failed int `json:"failed"`
		} `json:"summary"`
	}{APIVersion: APIVersion, Kind: "TestReport", Results: []jsonCase{}}
	for _, c := range r.Cases {
		doc.Results = append(doc.Results, jsonCase{File: c.File, DaemonSet: c.DaemonSet, Manifest: c.Manifest, Rule: c.Rule,
			Expected: c.Expected, ExpectedNodes: c.ExpectedNodes, Got: c.Got, GotNodes: c.GotNodes, Passed: c.Passed,
			Findings: append([]policy.Finding{}, c.Findings...)})
	}
	doc.Summary.Files, doc.Summary.Tests = len(r.Files), len(r.Cases)
	doc.Summary.Failed = r.Failed()
	doc.Summary.Passed = len(r.Cases) - doc.Summary.Failed
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// JUnitSuites is the JUnit XML of a run: one test suite per test file, one
// test case per expectation. Its fields are what WriteJUnit writes, and
// what a test reads back.
type JUnitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is one test file.
type JUnitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []JUnitCase `xml:"testcase"`
}

// JUnitCase is one expectation: failed with how it differs and the
// findings dsguard gave, or passed with them in system-out.
type JUnitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Failure   *JUnitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// JUnitFailure is a failed expectation.
type JUnitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML.
func WriteJUnit(w io.Writer, r *Report) error {
	doc := JUnitSuites{Name: "dsguard test", Tests: len(r.Cases), Failures: r.Failed()}
	suite := map[string]int{}
	for _, f := range r.Files {
		suite[f] = len(doc.Suites)
		doc.Suites = append(doc.Suites, JUnitSuite{Name: f})
	}
	for i := range r.Cases {
		c := &r.Cases[i]
		s := &doc.Suites[suite[c.File]]
		jc := JUnitCase{Name: fmt.Sprintf("%s %s %s", c.daemonSet(), c.Rule, verdict(c.Expected, c.ExpectedNodes)),
			Classname: c.File, File: c.Manifest}
		lines := strings.Join(c.findingLines(), "\n")
		if c.Passed {
			if len(c.Findings) > 0 {
				jc.SystemOut = lines
			}
		} else {
			s.Failures++
			jc.Failure = &JUnitFailure{Message: c.difference(), Type: string(c.Got), Text: lines}
		}
		s.Tests++
		s.Cases = append(s.Cases, jc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
