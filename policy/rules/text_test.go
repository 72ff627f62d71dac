package rules

import (
	"fmt"
	"testing"
)

// TestSprintf: the rules' formatter writes what fmt.Sprintf writes for the
// verbs it knows, also for arguments that need escaping and for a verb
// without its argument.
func TestSprintf(t *testing.T) {
	args := []string{"", "node-exporter", `a "quoted" name`, `back\slash`, "tab\there", "ünïcode", "\x00\xff", "100%"}
	for _, tt := range []struct {
		format string
		args   int // how many arguments to pass
	}{
		{"", 0}, {"plain", 0}, {"%s", 1}, {"%q", 1}, {"%%", 0}, {"100%% of %s", 1},
		{"%s %q image %q %s: nodes may run different builds", 4},
		{"%q%q%s", 3}, {"%s and %q", 1}, {"%q", 0},
	} {
		for _, a := range args {
			vals := make([]string, tt.args)
			anys := make([]any, tt.args)
			for i := range vals {
				vals[i] = a + fmt.Sprint(i)
				anys[i] = vals[i]
			}
			format := tt.format
			want := fmt.Sprintf(format, anys...)
			if got := sprintf(format, vals...); got != want {
				t.Errorf("sprintf(%q, %q) = %q, want %q", format, vals, got, want)
			}
		}
	}
}
