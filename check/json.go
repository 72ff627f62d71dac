package check

import (
	"io"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/policy"
)

// The JSON report's type; bump the version on any incompatible change.
const (
	JSONAPIVersion = "dsguard.io/v1alpha1"
	JSONKind       = "CheckReport"
)

// jsonReport is the JSON report; Results is written element by element
// (streamMarker in the skeleton), so the summary, known only at the end,
// follows the results.
type jsonReport struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Results    any            `json:"results"`
	Skipped    map[string]int `json:"skipped"`
	Errors     []jsonError    `json:"errors"`
	Notes      []string       `json:"notes"`
	Summary    Summary        `json:"summary"`
	// Error is the error that stopped the check before the end of its
	// input: the report then holds only the DaemonSets judged until then.
	Error string `json:"error,omitempty"`
}

type jsonResult struct {
	File      string        `json:"file"`
	Document  int           `json:"document"`
	Item      int           `json:"item,omitempty"`
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	Line      int           `json:"line,omitempty"`
	Verdict   Verdict       `json:"verdict"`
	Findings  []jsonFinding `json:"findings"`
	// Placement is present when the node set is known (--nodes, audit).
	Placement *coverage.Placement `json:"placement,omitempty"`
	// Fit is present when --nodes holds the cluster's Pods: the outcome
	// on each node the placement covers.
	Fit *fit.Report `json:"fit,omitempty"`
}

// jsonFinding is a finding with where its field is written.
type jsonFinding struct {
	Rule        string        `json:"rule"`
	Action      policy.Action `json:"action"`
	Field       string        `json:"field,omitempty"`
	Line        int           `json:"line,omitempty"`
	Column      int           `json:"column,omitempty"`
	Message     string        `json:"message"`
	Remediation string        `json:"remediation,omitempty"`
	Details     []string      `json:"details,omitempty"`
	Exempted    string        `json:"exempted,omitempty"`
}

type jsonError struct {
	File     string `json:"file"`
	Document int    `json:"document"`
	Item     int    `json:"item,omitempty"`
	Error    string `json:"error"`
}

// WriteJSON renders the report as one JSON object with a stable shape:
// lists are never null, and every finding (audit level included) is listed.
func WriteJSON(w io.Writer, r *Results) error { return writeAll(NewJSONWriter(w), r) }

// NewJSONWriter returns a Writer of WriteJSON's report that writes each
// result as it comes, and the summary, skipped kinds, unreadable documents
// and notes after the results.
func NewJSONWriter(w io.Writer) Writer { return &jsonWriter{out: jsonStream{w: w}} }

type jsonWriter struct{ out jsonStream }

func (j *jsonWriter) skeleton() *jsonReport {
	return &jsonReport{APIVersion: JSONAPIVersion, Kind: JSONKind, Results: streamMarker}
}

func (j *jsonWriter) Result(res *Result) error {
	findings := make([]jsonFinding, len(res.Findings))
	for i, f := range res.Findings {
		findings[i] = jsonFinding{Rule: f.RuleID, Action: f.Action, Field: f.FieldString(), Message: f.Message,
			Remediation: f.Remediation, Details: f.Details, Exempted: f.Exempted}
		if i < len(res.Positions) {
			findings[i].Line, findings[i].Column = res.Positions[i].Line, res.Positions[i].Column
		}
	}
	return j.out.element(j.skeleton(), jsonResult{
		File: res.Location.File, Document: res.Location.Document, Item: res.Location.Item, Line: res.Location.Line,
		Namespace: res.Namespace, Name: res.Name, Verdict: res.Verdict(), Findings: findings, Placement: res.Placement,
		Fit: res.Fit,
	})
}

func (j *jsonWriter) Finish(r *Results) error {
	out := j.skeleton()
	out.Summary, out.Skipped, out.Errors, out.Notes = r.Summary(), map[string]int{}, []jsonError{}, []string{}
	for k, v := range r.Skipped {
		out.Skipped[k] = v
	}
	for _, e := range r.Errors {
		out.Errors = append(out.Errors, jsonError{File: e.Location.File, Document: e.Location.Document,
			Item: e.Location.Item, Error: e.Err.Error()})
	}
	out.Notes = append(out.Notes, r.Notes...)
	if r.Stopped != nil {
		out.Error = r.stoppedMessage()
	}
	return j.out.finish(out)
}
