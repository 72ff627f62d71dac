package webhook

import (
	"strings"
	"testing"
)

func TestNamedLine(t *testing.T) {
	long := func(c string) string { return strings.Repeat(c, maxWarningLen) }
	tests := []struct {
		name  string
		names []string
		want  string
	}{
		{"all fit", []string{"kube-system/cilium", "monitoring/node-exporter"}, "rule: kube-system/cilium, monitoring/node-exporter: lose it"},
		{"the last do not fit: counted", []string{"a/short", long("b"), long("c")}, "rule: a/short and 2 more: lose it"},
		{"not even the first fits: all counted", []string{long("a"), long("b")}, "rule: 2 DaemonSets: lose it"},
		{"a single name too long", []string{long("a")}, "rule: 1 DaemonSet: lose it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := namedLine("rule: ", tt.names, ": lose it")
			if got != tt.want {
				t.Errorf("namedLine = %q, want %q", got, tt.want)
			}
			if len(got) > maxWarningLen {
				t.Errorf("%d bytes, over the limit of %d", len(got), maxWarningLen)
			}
		})
	}
}
