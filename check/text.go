package check

import (
	"fmt"
	"io"
	"strings"

	"github.com/dsguard/dsguard/policy"
)

// WriteText renders the report for a person at a terminal: every DaemonSet
// with its verdict, each visible finding with rule, field, line, message and
// fix, then every unreadable document, then a summary line.
func WriteText(w io.Writer, r *Results) error { return writeAll(NewTextWriter(w, false), r) }

// WriteWide is WriteText with each DaemonSet's placement: the nodes it will
// run on and every skipped node grouped by reason.
func WriteWide(w io.Writer, r *Results) error { return writeAll(NewTextWriter(w, true), r) }

// NewTextWriter returns a Writer of WriteText's report (wide: WriteWide's)
// that prints each DaemonSet as it is judged.
func NewTextWriter(w io.Writer, wide bool) Writer { return textWriter{w: w, wide: wide} }

type textWriter struct {
	w    io.Writer
	wide bool
}

func (t textWriter) Result(res *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: DaemonSet %s/%s: %s\n", res.Location, res.Namespace, res.Name, res.Verdict())
	res.eachVisible(func(f policy.Finding, line int) {
		at := ""
		if line > 0 {
			at = fmt.Sprintf("  (line %d)", line)
		}
		fmt.Fprintf(&b, "  %-4s  %s  %s%s\n", strings.ToUpper(string(f.Action)), f.RuleID, f.FieldString(), at)
		fmt.Fprintf(&b, "        %s\n", f.Message)
		for _, d := range f.Details {
			fmt.Fprintf(&b, "          %s\n", d)
		}
		fmt.Fprintf(&b, "        fix: %s\n", f.Remediation)
	})
	if t.wide && res.Placement != nil {
		WritePlacement(&b, res.Placement, "  ")
	}
	if t.wide && res.Fit != nil {
		WriteFit(&b, res.Fit, "  ")
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

// Finish prints what follows the DaemonSets: every unreadable document, the
// summary line and the notes. A run that stopped early prints nothing more:
// its error, printed after, is the last word.
func (t textWriter) Finish(r *Results) error {
	if r.Stopped != nil {
		return nil
	}
	var b strings.Builder
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "%s: error: %v\n", e.Location, e.Err)
	}
	s := r.Summary()
	fmt.Fprintf(&b, "\nchecked %s in %s: %d denied, %d with warnings, %d passed",
		plural(s.DaemonSets, "DaemonSet"), plural(s.Files, "file"), s.Denied, s.Warned, s.Passed)
	if s.Skipped > 0 {
		fmt.Fprintf(&b, "; %s of other kinds skipped", plural(s.Skipped, "object"))
	}
	if s.Errors > 0 {
		fmt.Fprintf(&b, "; %s could not be read", plural(s.Errors, "document"))
	}
	b.WriteString("\n")
	if r.auditFindings > 0 {
		fmt.Fprintf(&b, "%s recorded at audit level (shown with -o json)\n", plural(r.auditFindings, "finding"))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
