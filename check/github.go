package check

import (
	"fmt"
	"io"
	"strings"

	"github.com/dsguard/dsguard/policy"
)

// WriteGitHub renders the report as GitHub Actions workflow commands: an
// ::error annotation per deny finding and a ::warning per warn finding, at the
// file and line of the field, so they show on the pull request's diff; an
// ::error per unreadable document; the summary as a plain line.
func WriteGitHub(w io.Writer, r *Results) error { return writeAll(NewGitHubWriter(w), r) }

// NewGitHubWriter returns a Writer of WriteGitHub's commands that prints
// each DaemonSet's annotations as it is judged.
func NewGitHubWriter(w io.Writer) Writer { return githubWriter{w: w} }

type githubWriter struct{ w io.Writer }

func (g githubWriter) Result(res *Result) error {
	var b strings.Builder
	for j, f := range res.Findings {
		var cmd string
		switch f.Action {
		case policy.ActionDeny:
			cmd = "error"
		case policy.ActionWarn:
			cmd = "warning"
		default:
			continue
		}
		props := []string{"file=" + ghProperty(res.Location.File)}
		if j < len(res.Positions) && res.Positions[j].Line > 0 {
			props = append(props, fmt.Sprintf("line=%d", res.Positions[j].Line), fmt.Sprintf("col=%d", res.Positions[j].Column))
		}
		props = append(props, "title="+ghProperty("dsguard "+f.RuleID))
		fmt.Fprintf(&b, "::%s %s::%s\n", cmd, strings.Join(props, ","), ghData(findingText(res, f)))
	}
	_, err := io.WriteString(g.w, b.String())
	return err
}

// Finish prints the annotations of unreadable documents, the summary line
// and the notes; for a run that stopped early, an annotation with its error.
func (g githubWriter) Finish(r *Results) error {
	var b strings.Builder
	if r.Stopped != nil {
		fmt.Fprintf(&b, "::error title=dsguard::%s\n", ghData(r.stoppedMessage()))
		_, err := io.WriteString(g.w, b.String())
		return err
	}
	for _, e := range r.Errors {
		props := "file=" + ghProperty(e.Location.File)
		if e.Location.Line > 0 {
			props += fmt.Sprintf(",line=%d", e.Location.Line)
		}
		fmt.Fprintf(&b, "::error %s,title=dsguard::%s\n", props, ghData(e.Error()))
	}
	s := r.Summary()
	fmt.Fprintf(&b, "dsguard: checked %s: %d denied, %d with warnings, %d passed, %d unreadable\n",
		plural(s.DaemonSets, "DaemonSet"), s.Denied, s.Warned, s.Passed, s.Errors)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "::notice title=dsguard::%s\n", ghData(n))
	}
	_, err := io.WriteString(g.w, b.String())
	return err
}

// ghData escapes a workflow command's message.
func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// ghProperty escapes a workflow command's property value.
func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
