package policy

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Annotations dsguard reads on DaemonSets.
const (
	// ExemptionAnnotationPrefix + rule ID exempts a DaemonSet from that rule.
	// The value is the human reason, optionally followed by
	// "; expires=YYYY-MM-DD" (valid through that day, UTC).
	ExemptionAnnotationPrefix = "exempt.dsguard.io/"
	// IntendedCoverageAnnotation declares that the DaemonSet deliberately
	// skips the nodes it skips; its value says why. Rules that flag a coverage
	// gap then record it instead of warning or denying.
	IntendedCoverageAnnotation = "coverage.dsguard.io/intended"
)

// expiresWord starts the optional expiry at the end of an exemption.
const expiresWord = "expires"

// Exemption is a parsed exemption annotation.
type Exemption struct {
	Reason  string
	Expires time.Time // zero: no expiry; otherwise the first instant it no longer holds
}

// ParseExemption parses "reason[; expires=YYYY-MM-DD]".
func ParseExemption(value string) (Exemption, error) {
	reason := strings.TrimSpace(value)
	var e Exemption
	head, tail := "", reason
	if i := strings.LastIndex(reason, ";"); i >= 0 {
		head, tail = reason[:i], reason[i+1:]
	}
	if date, ok := cutExpiry(tail); ok {
		day, err := time.Parse(time.DateOnly, date)
		if err != nil {
			return Exemption{}, fmt.Errorf("expiry %q is not a date in the form YYYY-MM-DD", date)
		}
		e.Expires = day.AddDate(0, 0, 1)
		reason = strings.TrimSpace(head)
	}
	if reason == "" {
		return Exemption{}, errors.New("the reason is empty: say why this DaemonSet is exempt")
	}
	e.Reason = reason
	return e, nil
}

// cutExpiry returns the date of an "expires=DATE" part. It accepts any case
// and spaces around "=" (or ":"), so that "Expires = 2025-01-31" or a bare
// "expires=2025-01-31" without a reason is an expiry (valid or not) rather
// than part of the reason of an exemption that then never expires.
func cutExpiry(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) < len(expiresWord) || !strings.EqualFold(s[:len(expiresWord)], expiresWord) {
		return "", false
	}
	rest := strings.TrimSpace(s[len(expiresWord):])
	if rest == "" || (rest[0] != '=' && rest[0] != ':') {
		return "", false
	}
	return strings.TrimSpace(rest[1:]), true
}

// Expired reports whether the exemption no longer holds at now.
func (e Exemption) Expired(now time.Time) bool {
	return !e.Expires.IsZero() && !now.Before(e.Expires)
}
