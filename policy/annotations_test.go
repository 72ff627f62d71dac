package policy_test

import (
	"strings"
	"testing"

	"github.com/dsguard/dsguard/policy"
)

// TestCleanReason: a reason the DaemonSet's author wrote reaches terminals,
// Warning lines and Events; whatever it holds, it arrives as one plain line.
func TestCleanReason(t *testing.T) {
	long := strings.Repeat("x", policy.MaxReasonLength+10)
	tests := []struct {
		name, in, want string
	}{
		{"plain", "migrating to v2 (OPS-123)", "migrating to v2 (OPS-123)"},
		{"newline that would forge a second Warning line", "ok\nWarning: everything is fine", "ok Warning: everything is fine"},
		{"carriage return that would overwrite the line", "denied\rallowed", "denied allowed"},
		{"ANSI colour", "\x1b[31mred\x1b[0m text", "red text"},
		{"cursor movement and erase", "a\x1b[2K\x1b[1Ab", "ab"},
		{"OSC 8 hyperlink ended by BEL", "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07", "click"},
		{"OSC title ended by ST", "\x1b]0;pwned\x1b\\title", "title"},
		{"two-character escape", "a\x1bcb", "ab"},
		{"lone ESC at the end", "a\x1b", "a"},
		{"C0 and C1 controls", "a\x00b\x07c\u0085d\u009be", "a b c d e"},
		{"bidirectional override", "exempt \u202eevil\u202c ok", "exempt evil ok"},
		{"line separator", "a\u2028b", "a b"},
		{"zero-width space", "a\u200bb", "a b"},
		{"runs of white space", "  a \t\t b  ", "a b"},
		{"invalid UTF-8", "a\xffb", "a\ufffdb"},
		{"nothing but escapes", "\x1b[0m\x1b[K", ""},
		{"cut at the limit", long, strings.Repeat("x", policy.MaxReasonLength) + "…"},
		{"exactly at the limit", long[:policy.MaxReasonLength], long[:policy.MaxReasonLength]},
		{"unicode kept", "Wartung für GPU-Knoten", "Wartung für GPU-Knoten"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.CleanReason(tt.in); got != tt.want {
				t.Errorf("CleanReason(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
