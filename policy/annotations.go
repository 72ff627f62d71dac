package policy

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
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

// ParseExemption parses "reason[; expires=YYYY-MM-DD]". The reason is
// cleaned for display (CleanReason).
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
	// Cleaned first: a reason of nothing but escape sequences is empty.
	if e.Reason = CleanReason(reason); e.Reason == "" {
		return Exemption{}, errors.New("the reason is empty: say why this DaemonSet is exempt")
	}
	return e, nil
}

// MaxReasonLength is how many characters of an exemption's or
// intended-coverage annotation's reason dsguard shows; the rest is cut.
const MaxReasonLength = 256

// CleanReason makes an annotation's reason safe to show wherever dsguard
// shows it (a terminal, a Warning line, an Event, a log): the DaemonSet's
// author wrote it, and the API server drops a Warning that holds a newline.
// Escape sequences are removed, control, bidirectional-override and
// line-separator characters and runs of white space become one space, invalid
// UTF-8 becomes U+FFFD, and past MaxReasonLength characters it ends in "…".
func CleanReason(s string) string {
	var b strings.Builder
	space, n := false, 0
	for i := 0; i < len(s) && n < MaxReasonLength; {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0x1b { // ESC: skip the whole sequence, not only the ESC
			i += escapeLength(s[i:])
			continue
		}
		i += size
		if unicode.IsSpace(r) || unicode.IsControl(r) || hiddenFormat(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			n++
			space = false
		}
		b.WriteRune(r) // utf8.RuneError for invalid bytes: U+FFFD
		n++
		if n == MaxReasonLength && i < len(s) {
			b.WriteString("…")
		}
	}
	return b.String()
}

// escapeLength is the length of the escape sequence at the start of s (which
// starts with ESC): CSI ("ESC [ ... final"), OSC and the other string
// commands (up to BEL or ESC and a backslash), else ESC and the one character after it.
func escapeLength(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[':
		for i := 2; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
		}
		return len(s)
	case ']', 'P', '^', '_', 'X':
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	}
	_, size := utf8.DecodeRuneInString(s[1:])
	return 1 + size
}

// hiddenFormat reports the format characters that reorder or break what a
// terminal shows: bidirectional overrides and isolates, line and paragraph
// separators, zero-width characters.
func hiddenFormat(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c,
		r == 0x2028, r == 0x2029, r >= 0x200b && r <= 0x200d, r == 0xfeff:
		return true
	}
	return false
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
