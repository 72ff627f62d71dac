package check

import (
	"fmt"
	"io"
	"strings"

	"github.com/dsguard/dsguard/policy"
)

// WriteText renders the report for a person at a terminal: every DaemonSet
// with its verdict, each visible finding with rule, field, message and fix,
// then every unreadable document, then a summary line.
func WriteText(w io.Writer, r *Results) error { return writeText(w, r, false) }

// WriteWide is WriteText with each DaemonSet's placement: the nodes it will
// run on and every skipped node grouped by reason.
func WriteWide(w io.Writer, r *Results) error { return writeText(w, r, true) }

func writeText(w io.Writer, r *Results, wide bool) error {
	var b strings.Builder
	audit := 0
	for i := range r.Results {
		res := &r.Results[i]
		fmt.Fprintf(&b, "%s: DaemonSet %s/%s: %s\n", res.Location, res.Namespace, res.Name, res.Verdict())
		for _, f := range res.Findings {
			if f.Action != policy.ActionDeny && f.Action != policy.ActionWarn {
				audit++
				continue
			}
			fmt.Fprintf(&b, "  %-4s  %s  %s\n", strings.ToUpper(string(f.Action)), f.RuleID, f.FieldString())
			fmt.Fprintf(&b, "        %s\n", f.Message)
			for _, d := range f.Details {
				fmt.Fprintf(&b, "          %s\n", d)
			}
			fmt.Fprintf(&b, "        fix: %s\n", f.Remediation)
		}
		if wide && res.Placement != nil {
			WritePlacement(&b, res.Placement, "  ")
		}
	}
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
	if audit > 0 {
		fmt.Fprintf(&b, "%s recorded at audit level (shown with -o json)\n", plural(audit, "finding"))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
