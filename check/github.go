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
func WriteGitHub(w io.Writer, r *Results) error {
	stream := GitHubStream(w)
	for i := range r.Results {
		if err := stream(&r.Results[i]); err != nil {
			return err
		}
	}
	return WriteGitHubSummary(w, r)
}

// GitHubStream returns an Input.Stream that prints each DaemonSet's
// annotations as WriteGitHub does, as soon as it is judged;
// WriteGitHubSummary then prints the rest.
func GitHubStream(w io.Writer) func(*Result) error {
	return func(res *Result) error {
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
		_, err := io.WriteString(w, b.String())
		return err
	}
}

// WriteGitHubSummary prints the annotations of unreadable documents, the
// summary line and the notes.
func WriteGitHubSummary(w io.Writer, r *Results) error {
	var b strings.Builder
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
	_, err := io.WriteString(w, b.String())
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
