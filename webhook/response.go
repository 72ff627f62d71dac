package webhook

import (
	"fmt"
	"strings"
	"unicode"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/policy"
)

// Limits the API server puts on warnings: past a total of 4,096 characters
// (shared with every other webhook on the request) each warning is cut to
// 256 characters and the rest are dropped; a warning with a newline is dropped
// silently. dsguard stays well inside both.
const (
	maxWarningLen = 256
	warningBudget = 2048
)

// buildResponse turns findings into the admission response: any deny finding
// rejects with one message listing all of them; warnings become warning
// lines; audit-level findings become audit annotations.
func buildResponse(ds *appsv1.DaemonSet, findings []policy.Finding) admission.Response {
	var denies, warns []policy.Finding
	var annotations map[string]string
	for _, f := range findings {
		switch f.Action {
		case policy.ActionDeny:
			denies = append(denies, f)
		case policy.ActionWarn:
			warns = append(warns, f)
		case policy.ActionAudit:
			msg := f.Message
			if f.Exempted != "" {
				msg += " (exempted: " + f.Exempted + ")"
			}
			if prev, ok := annotations[f.RuleID]; ok {
				msg = prev + "; " + msg
			}
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[f.RuleID] = msg
		}
	}
	var resp admission.Response
	if len(denies) > 0 {
		resp = admission.Denied(denyMessage(ds, denies))
	} else {
		resp = admission.Allowed("")
	}
	resp.Warnings = warningLines(warns)
	if len(annotations) > 0 {
		resp.AuditAnnotations = annotations
	}
	return resp
}

// denyMessage lists every deny finding with its field and fix. kubectl prints
// it after "admission webhook ... denied the request: ".
func denyMessage(ds *appsv1.DaemonSet, denies []policy.Finding) string {
	var b strings.Builder
	rules := "rule"
	if len(denies) > 1 {
		rules = "rules"
	}
	fmt.Fprintf(&b, "DaemonSet %s/%s breaks %d dsguard coverage %s:", ds.Namespace, ds.Name, len(denies), rules)
	for _, f := range denies {
		fmt.Fprintf(&b, "\n[%s] %s: %s\n  fix: %s", f.RuleID, f.FieldString(), f.Message, f.Remediation)
	}
	return b.String()
}

// warningLines renders one line per warning finding, rule ID first, most
// important first (findings arrive sorted), within the budget; what does not
// fit is summarised in a last line.
func warningLines(warns []policy.Finding) []string {
	if len(warns) == 0 {
		return nil
	}
	out := make([]string, 0, len(warns))
	used := 0
	for i, f := range warns {
		line := oneLine(f.RuleID + ": " + f.Message)
		if used+len(line) > warningBudget {
			out = append(out, fmt.Sprintf("dsguard: %d more warnings not shown; run `dsguard check` on the manifest to see all", len(warns)-i))
			break
		}
		out = append(out, line)
		used += len(line)
	}
	return out
}

// oneLine removes newlines (a warning containing one is dropped by the API
// server) and cuts the line to the per-warning limit.
func oneLine(s string) string {
	if !singleSpaced(s) {
		s = strings.Join(strings.Fields(s), " ")
	}
	return truncate(s, maxWarningLen)
}

// truncate cuts s to n bytes, the last three an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// singleSpaced reports whether s is already what strings.Fields and a join
// with single spaces would make of it: no whitespace but single spaces
// between words. Nearly every message is; checking is cheaper than
// splitting.
func singleSpaced(s string) bool {
	prevSpace := true // no leading space
	for _, r := range s {
		space := unicode.IsSpace(r)
		if space && (r != ' ' || prevSpace) {
			return false
		}
		prevSpace = space
	}
	return !prevSpace || s == ""
}
