package check

import (
	"encoding/json"
	"io"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
)

// The JSON report's type; bump the version on any incompatible change.
const (
	JSONAPIVersion = "dsguard.io/v1alpha1"
	JSONKind       = "CheckReport"
)

type jsonReport struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Summary    Summary        `json:"summary"`
	Results    []jsonResult   `json:"results"`
	Skipped    map[string]int `json:"skipped"`
	Errors     []jsonError    `json:"errors"`
	Notes      []string       `json:"notes"`
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
func WriteJSON(w io.Writer, r *Results) error {
	out := jsonReport{
		APIVersion: JSONAPIVersion, Kind: JSONKind, Summary: r.Summary(),
		Results: []jsonResult{}, Skipped: map[string]int{}, Errors: []jsonError{}, Notes: []string{},
	}
	for i := range r.Results {
		res := &r.Results[i]
		findings := make([]jsonFinding, len(res.Findings))
		for j, f := range res.Findings {
			findings[j] = jsonFinding{Rule: f.RuleID, Action: f.Action, Field: f.FieldString(), Message: f.Message,
				Remediation: f.Remediation, Details: f.Details, Exempted: f.Exempted}
			if j < len(res.Positions) {
				findings[j].Line, findings[j].Column = res.Positions[j].Line, res.Positions[j].Column
			}
		}
		out.Results = append(out.Results, jsonResult{
			File: res.Location.File, Document: res.Location.Document, Item: res.Location.Item, Line: res.Location.Line,
			Namespace: res.Namespace, Name: res.Name, Verdict: res.Verdict(), Findings: findings, Placement: res.Placement,
		})
	}
	for k, v := range r.Skipped {
		out.Skipped[k] = v
	}
	for _, e := range r.Errors {
		out.Errors = append(out.Errors, jsonError{File: e.Location.File, Document: e.Location.Document,
			Item: e.Location.Item, Error: e.Err.Error()})
	}
	out.Notes = append(out.Notes, r.Notes...)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
