package rules

import (
	"strconv"
	"strings"
)

// sprintf is fmt.Sprintf for string arguments and the verbs %s, %q and %%
// only, built in one allocation: fmt boxes every argument and allocates per
// call, and the rules format their findings on every admission. The buffer
// is sized for the format, every argument and its quotes, so only an
// argument that needs escaping makes it grow. A verb without an argument is
// written as fmt writes it (%!s(MISSING)); any other verb is copied as it
// stands (fmt would complain in its own words).
func sprintf(format string, args ...string) string {
	n := len(format)
	for _, a := range args {
		n += len(a) + len(`""`)
	}
	var b strings.Builder
	b.Grow(n)
	next := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch verb := format[i]; {
		case (verb == 's' || verb == 'q') && next == len(args):
			b.WriteString("%!")
			b.WriteByte(verb)
			b.WriteString("(MISSING)")
		case verb == 's':
			b.WriteString(args[next])
			next++
		case verb == 'q':
			writeQuoted(&b, args[next])
			next++
		case verb == '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(verb)
		}
	}
	return b.String()
}

// plainQuote reports whether strconv.Quote(s) is s between double quotes:
// printable ASCII without a quote or backslash, as names and paths are.
func plainQuote(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func writeQuoted(b *strings.Builder, s string) {
	if !plainQuote(s) {
		b.WriteString(strconv.Quote(s))
		return
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}
