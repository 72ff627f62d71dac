package check

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
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
	// XMLName names the element when a test case is encoded on its own.
	XMLName   xml.Name      `xml:"testcase"`
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
	j := NewJUnitWriter(w, r.FailOn)
	if err := writeAll(j, r); err != nil {
		return errors.Join(err, j.Close())
	}
	return nil
}

// junitCaseIndent is the indentation of a test case: below <testsuites>
// and <testsuite>.
const junitCaseIndent = "    "

// NewJUnitWriter returns a Writer of WriteJUnit's report for a run that
// fails at failOn. The counts of tests, failures and errors are attributes of
// the opening tags, known only at the end. Jenkins and GitLab count the test
// cases themselves, but the JUnit schemas require those attributes, and
// dashboards and metric collectors read the counts from them; totals in a
// trailing element would be read by nobody. So each test case is encoded as
// it comes into a temporary file, and Finish writes the opening tags with the
// counts and then copies the file: the output is the same, memory stays
// bounded, and the disk holds the test cases until then (under $TMPDIR).
// Close removes the file of a writer that is not finished.
func NewJUnitWriter(w io.Writer, failOn policy.Action) *JUnitWriter {
	if failOn == "" {
		failOn = policy.ActionDeny
	}
	return &JUnitWriter{w: w, failOn: failOn}
}

// JUnitWriter is the Writer of JUnit XML; see NewJUnitWriter.
type JUnitWriter struct {
	w      io.Writer
	failOn policy.Action
	// spool holds the encoded test cases until Finish; nil until the first.
	spool *os.File
	buf   *bufio.Writer
	enc   *xml.Encoder
	// removed is set once the spool's name is removed (it stays open).
	removed  bool
	tests    int
	failures int
}

// Result encodes the DaemonSet's test case into the spool.
func (j *JUnitWriter) Result(res *Result) error {
	c := junitCase{Name: "DaemonSet " + res.Namespace + "/" + res.Name, Classname: res.Location.File,
		File: res.Location.File, Line: res.Location.Line}
	var lines []string
	res.eachVisible(func(f policy.Finding, line int) {
		at := ""
		if line > 0 {
			at = fmt.Sprintf(" (line %d)", line)
		}
		lines = append(lines, fmt.Sprintf("%s %s %s%s: %s\n  fix: %s",
			strings.ToUpper(string(f.Action)), f.RuleID, f.FieldString(), at, f.Message, f.Remediation))
	})
	switch {
	case res.Fails(j.failOn):
		j.failures++
		c.Failure = &junitProblem{Type: string(res.Verdict()),
			Message: fmt.Sprintf("%s: %d deny, %d warn", res.Verdict(), policy.Count(res.Findings, policy.ActionDeny),
				policy.Count(res.Findings, policy.ActionWarn)),
			Text: strings.Join(lines, "\n")}
	case len(lines) > 0:
		c.SystemOut = strings.Join(lines, "\n")
	}
	return j.add(c)
}

// add encodes one test case into the spool; the encoder puts each on a line
// of its own.
func (j *JUnitWriter) add(c junitCase) error {
	if j.spool == nil {
		f, err := os.CreateTemp("", "dsguard-junit-*.xml")
		if err != nil {
			return fmt.Errorf("JUnit output: cannot hold the test cases until their counts are known: %w", err)
		}
		// Removed at once where the system lets an open file be removed,
		// so that nothing is left behind even if dsguard is killed.
		j.spool, j.removed = f, os.Remove(f.Name()) == nil
		j.buf = bufio.NewWriter(f)
		j.enc = xml.NewEncoder(j.buf)
		j.enc.Indent(junitCaseIndent, "  ")
	}
	j.tests++
	return j.enc.Encode(c)
}

// Finish adds a test case per unreadable document (and one for the error
// that stopped the run), then writes the report: the opening tags with the
// counts, the test cases, the closing tags.
func (j *JUnitWriter) Finish(r *Results) error {
	defer j.Close()
	errs := 0
	for _, e := range r.Errors {
		errs++
		if err := j.add(junitCase{Name: e.Location.String(), Classname: e.Location.File,
			File: e.Location.File, Line: e.Location.Line,
			Error: &junitProblem{Type: "unreadable", Message: e.Err.Error(), Text: e.Error()}}); err != nil {
			return err
		}
	}
	if r.Stopped != nil {
		errs++
		msg := r.stoppedMessage()
		if err := j.add(junitCase{Name: "dsguard check", Classname: "dsguard",
			Error: &junitProblem{Type: "stopped", Message: msg, Text: msg}}); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(j.w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(j.w)
	enc.Indent("", "  ")
	out := junitSuites{Name: "dsguard", Tests: j.tests, Failures: j.failures, Errors: errs,
		Suites: []junitSuite{{Name: "dsguard check", Tests: j.tests, Failures: j.failures, Errors: errs}}}
	if j.spool == nil {
		// No test case: the document is whole as it stands.
		if err := enc.Encode(out); err != nil {
			return err
		}
		_, err := io.WriteString(j.w, "\n")
		return err
	}
	for _, t := range []xml.Token{out.start(), out.Suites[0].start()} {
		if err := enc.EncodeToken(t); err != nil {
			return err
		}
	}
	if err := enc.Flush(); err != nil {
		return err
	}
	if err := j.buf.Flush(); err != nil {
		return err
	}
	if _, err := j.spool.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.WriteString(j.w, "\n"); err != nil {
		return err
	}
	if _, err := io.Copy(j.w, j.spool); err != nil {
		return err
	}
	_, err := io.WriteString(j.w, "\n  </testsuite>\n</testsuites>\n")
	return err
}

// Close removes the spool; Finish calls it.
func (j *JUnitWriter) Close() error {
	if j.spool == nil {
		return nil
	}
	err := j.spool.Close()
	if !j.removed {
		err = errors.Join(err, os.Remove(j.spool.Name()))
	}
	j.spool = nil
	return err
}

// start is the opening tag of the test suites, with their counts.
func (s *junitSuites) start() xml.StartElement {
	return xml.StartElement{Name: xml.Name{Local: "testsuites"}, Attr: junitCounts(s.Name, s.Tests, s.Failures, s.Errors)}
}

// start is the opening tag of the test suite, with its counts.
func (s *junitSuite) start() xml.StartElement {
	return xml.StartElement{Name: xml.Name{Local: "testsuite"}, Attr: junitCounts(s.Name, s.Tests, s.Failures, s.Errors)}
}

func junitCounts(name string, tests, failures, errs int) []xml.Attr {
	return []xml.Attr{{Name: xml.Name{Local: "name"}, Value: name},
		{Name: xml.Name{Local: "tests"}, Value: strconv.Itoa(tests)},
		{Name: xml.Name{Local: "failures"}, Value: strconv.Itoa(failures)},
		{Name: xml.Name{Local: "errors"}, Value: strconv.Itoa(errs)}}
}
