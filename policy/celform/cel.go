package celform

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsguard/dsguard/policy"
)

// Lit renders s as a CEL string literal. Go's quoting escapes are a subset
// of CEL's, so a quoted Go string reads the same in CEL.
func Lit(s string) string { return strconv.Quote(s) }

// LitList renders a CEL list of string literals.
func LitList(ss []string) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = Lit(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// IsLiteralGlob reports whether a namespace glob matches exactly one name,
// so that a namespaceSelector on kubernetes.io/metadata.name can express it.
func IsLiteralGlob(g string) bool { return !strings.ContainsAny(g, `*?[\`) }

// globRegexp translates a path.Match pattern into an anchored RE2 pattern
// with the same meaning on a namespace name (which holds no '/').
func globRegexp(g string) string {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch c := g[i]; c {
		case '*':
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
		case '\\':
			if i+1 < len(g) {
				i++
				b.WriteString(regexp.QuoteMeta(string(g[i])))
			}
		case '[':
			end := strings.IndexByte(g[i+1:], ']')
			if end < 0 {
				// Compile rejects such globs; never reached.
				b.WriteString(regexp.QuoteMeta(g[i:]))
				i = len(g)
				continue
			}
			class := g[i+1 : i+1+end]
			if strings.HasPrefix(class, "^") {
				class = "^/" + class[1:]
			}
			b.WriteString("[" + class + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return b.String()
}

// NsMatchesAny is a CEL condition: the request's namespace matches one of
// the globs.
func NsMatchesAny(globs []string) string {
	if len(globs) == 0 {
		return "false"
	}
	parts := make([]string, len(globs))
	for i, g := range globs {
		if IsLiteralGlob(g) {
			parts[i] = "request.namespace == " + Lit(g)
		} else {
			parts[i] = "request.namespace.matches(" + Lit(globRegexp(g)) + ")"
		}
	}
	return "(" + strings.Join(parts, " || ") + ")"
}

// ExemptionValid is a CEL condition: the annotation value v (a CEL string
// expression) is an exemption that holds on the given day, with the same
// grammar as policy.ParseExemption: "reason[; expires=YYYY-MM-DD]", the
// expiry after the last ';', "expires" in any case, '=' or ':', valid
// through that day (UTC). CEL has no clock, so the day is fixed when the
// policies are rendered; dsguard serve renders them again at least every ten
// minutes.
func ExemptionValid(v, today string, g ExemptionGate) string {
	// The last ';'-separated part (or the whole value) is an expiry.
	hasExpiry := fmt.Sprintf(`%s.matches(%s)`, v, Lit(`(?i)(^|;)\s*expires\s*[=:][^;]*$`))
	// ... and holds a well-formed date.
	dateShape := fmt.Sprintf(`%s.matches(%s)`, v, Lit(`(?i)(^|;)\s*expires\s*[=:]\s*[0-9]{4}-[0-9]{2}-[0-9]{2}\s*$`))
	// CEL has no let: a one-element list binds the date, then its parts.
	date := fmt.Sprintf(`%s.find(%s).substring(0, 10)`, v, Lit(`[0-9]{4}-[0-9]{2}-[0-9]{2}\s*$`))
	calendar := "[int(d.substring(0, 4))].all(y, [int(d.substring(5, 7))].all(m, [int(d.substring(8, 10))].all(day, " +
		"m >= 1 && m <= 12 && day >= 1 && " +
		"day <= (m == 2 ? (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) ? 29 : 28) : (m in [4, 6, 9, 11] ? 30 : 31)))))"
	// From a deny rule, an exemption needs an expiry at most maxExemptionDays away.
	holds := fmt.Sprintf("[%s].all(d, %s && d >= %s && (!(%s) || d <= %s))", date, calendar, Lit(today), g.denyRule, Lit(g.latest))
	// A reason: something other than white space before the last ';'.
	reasonBefore := fmt.Sprintf(`%s.matches(%s)`, v, Lit(`(?s)\S.*;[^;]*$`))
	reasonOnly := fmt.Sprintf(`%s.matches(%s)`, v, Lit(`\S`))
	// A regular expression costs in proportion to the string: a value
	// longer than MaxExemptionLength is not honoured, so that the cost stays
	// bounded however long an annotation is (docs/modes.md).
	valid := fmt.Sprintf("(size(%s) <= %d && (%s ? (%s && %s && %s) : %s && !(%s)))",
		v, MaxExemptionLength, hasExpiry, dateShape, reasonBefore, holds, reasonOnly, g.denyRule)
	if len(g.namespaces) > 0 {
		valid = fmt.Sprintf("(%s && %s)", NsMatchesAny(g.namespaces), valid)
	}
	return valid
}

// ExemptionGate is what the policy's exemptions section asks of an
// exemption besides its grammar.
type ExemptionGate struct {
	// denyRule is a CEL condition: the exempted rule's action is deny, so
	// the exemption needs an expiry no later than latest (YYYY-MM-DD).
	denyRule, latest string
	// namespaces are exemptions.allowedNamespaces (globs); empty: anywhere.
	namespaces []string
}

// GateOf renders the policy's exemption settings for the day.
func GateOf(cfg *policy.Config, today time.Time, denyRule string) ExemptionGate {
	days := cfg.Exemptions.MaxExemptionDays
	return ExemptionGate{
		denyRule:   denyRule,
		latest:     today.UTC().AddDate(0, 0, days).Format(time.DateOnly),
		namespaces: cfg.Exemptions.AllowedNamespaces,
	}
}

// MaxExemptionLength is the longest exemption value the generated policies
// judge; a longer one counts as invalid.
const MaxExemptionLength = 4096

// Truncated is a CEL string: s cut to its last n characters, for messages
// (concatenating a string costs in proportion to its length).
func Truncated(s string, n int) string {
	return fmt.Sprintf("(size(%[1]s) > %[2]d ? '...' + %[1]s.substring(size(%[1]s) - %[2]d) : %[1]s)", s, n)
}

// SortedKeys are m's keys in order, so that rendered CEL is stable.
func SortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
