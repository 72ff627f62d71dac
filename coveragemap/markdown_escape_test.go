package coveragemap

import (
	"slices"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/coverage"
)

// TestMarkdownEscaping: names and reasons come from manifests nobody
// validated; in the pull-request table each stays text in its own cell.
func TestMarkdownEscaping(t *testing.T) {
	tests := []struct {
		name, in, cell, code string
	}{
		{"plain", "monitoring/node-exporter", "monitoring/node-exporter", "`monitoring/node-exporter`"},
		{"an image", "![x](https://example.com/t.png)", `!\[x\](https://example.com/t.png)`, "`![x](https://example.com/t.png)`"},
		{"HTML", "<img src=x onerror=alert(1)>", `\<img src=x onerror=alert(1)\>`, "`<img src=x onerror=alert(1)>`"},
		{"a cell break", "a|b", `a\|b`, "`a\\|b`"},
		{"a new row", "a\n| x | y |", `a \| x \| y \|`, "`a \\| x \\| y \\|`"},
		{"emphasis and strike", "*a* _b_ ~~c~~", `\*a\* \_b\_ \~\~c\~\~`, "`*a* _b_ ~~c~~`"},
		{"closing the code span", "a`](x)`b", "a\\`\\](x)\\`b", "``a`](x)`b``"},
		{"a run of backticks", "x```y", "x\\`\\`\\`y", "````x```y````"},
		{"a backtick at the edge", "`x", "\\`x", "`` `x ``"},
		{"an entity", "&lt;", `\&lt;`, "`&lt;`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := markdownCell(tt.in); got != tt.cell {
				t.Errorf("markdownCell(%q) = %q, want %q", tt.in, got, tt.cell)
			}
			if got := markdownCode(tt.in); got != tt.code {
				t.Errorf("markdownCode(%q) = %q, want %q", tt.in, got, tt.code)
			}
			for _, out := range []string{markdownCell(tt.in), markdownCode(tt.in)} {
				if strings.ContainsAny(out, "\n\r") {
					t.Errorf("%q spans lines", out)
				}
			}
		})
	}
}

// TestWriteMarkdown_HostileNames: a DaemonSet named to close its code span
// and a title with HTML print as text, in both tables.
func TestWriteMarkdown_HostileNames(t *testing.T) {
	hostile := Agent{Namespace: "monitoring", Name: "x`<img src=y>`|z", Placement: &coverage.Placement{RunsOnNodes: []string{"w-1"}}}
	m := Build(Input{Nodes: slices.Values(fleet), Title: "<script>t</script>", Agents: []Agent{hostile}})
	empty := Build(Input{Nodes: slices.Values(fleet), Title: "before"})
	var plain, change strings.Builder
	if err := m.WriteMarkdown(&plain); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdownChange(&change, empty, m); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"WriteMarkdown": plain.String(), "WriteMarkdownChange": change.String()} {
		if !strings.Contains(out, "| ``monitoring/x`<img src=y>`\\|z`` ") {
			t.Errorf("%s: the name is not one code span in its cell:\n%s", name, out)
		}
		if strings.Contains(out, "<script>") {
			t.Errorf("%s: the title's HTML is not escaped:\n%s", name, out)
		}
	}
}
