package policy

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Finding is one problem a rule found in a DaemonSet.
type Finding struct {
	// RuleID is the stable ID of the rule that produced the finding.
	RuleID string
	// Action is what to do with it, after the policy's action, enforcement,
	// namespace enforcement and exemptions have been applied.
	Action Action
	// Field is the path of the offending field in the DaemonSet.
	Field *field.Path
	// Message says what is wrong and why it matters for coverage, in one line.
	Message string
	// Remediation says how to fix it.
	Remediation string
	// Details carries optional extra lines (e.g. the nodes a DaemonSet skips).
	Details []string
	// Exempted holds the reason of the exemption annotation that turned this
	// finding into an audit record; empty otherwise.
	Exempted string
	// ExemptionExpires is the first instant the exemption no longer holds;
	// zero when it never expires (or there is none).
	ExemptionExpires time.Time
}

// FieldString returns the field path as text, "" when there is none.
func (f Finding) FieldString() string {
	if f.Field == nil {
		return ""
	}
	return f.Field.String()
}

// MarshalJSON gives findings a stable, documented shape for machines.
func (f Finding) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Rule        string   `json:"rule"`
		Action      Action   `json:"action"`
		Field       string   `json:"field,omitempty"`
		Message     string   `json:"message"`
		Remediation string   `json:"remediation,omitempty"`
		Details     []string `json:"details,omitempty"`
		Exempted    string   `json:"exempted,omitempty"`
		Expires     string   `json:"exemptionExpires,omitempty"`
	}{f.RuleID, f.Action, f.FieldString(), f.Message, f.Remediation, f.Details, f.Exempted,
		Exemption{Expires: f.ExemptionExpires}.LastDay()})
}

// SortFindings orders findings deterministically: strongest action first,
// then by rule ID. Findings of one rule keep the order the rule reported them
// in (container order, which reads better than containers[10] before
// containers[2]); ratcheting re-sorts after changing actions.
func SortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if c := cmp.Compare(b.Action.strength(), a.Action.strength()); c != 0 {
			return c
		}
		return cmp.Compare(a.RuleID, b.RuleID)
	})
}

// Count returns how many findings carry the given action.
func Count(fs []Finding, a Action) int {
	n := 0
	for i := range fs {
		if fs[i].Action == a {
			n++
		}
	}
	return n
}
