package vap

import (
	"os"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/policy/rules"
)

// notExpressedMarkdown is the per-rule list docs/modes.md carries between
// its not-expressed markers.
func notExpressedMarkdown() string {
	var b strings.Builder
	for _, r := range rules.Builtin().Rules() {
		b.WriteString("- **" + r.ID + "**: " + strings.Join(notExpressed(r.ID), "; ") + ".\n")
	}
	return b.String()
}

// TestNotExpressed_IsInTheDocs keeps docs/modes.md in step with what the
// generated policies say they cannot check.
func TestNotExpressed_IsInTheDocs(t *testing.T) {
	data, err := os.ReadFile("../docs/modes.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- not-expressed: generated from vap, kept by TestNotExpressed_IsInTheDocs -->\n", "<!-- end not-expressed -->"
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/modes.md lacks the markers %q and %q", begin, end)
	}
	if got, want := doc[i+len(begin):j], notExpressedMarkdown(); got != want {
		t.Errorf("docs/modes.md's list of what CEL cannot express is out of date; it should read:\n%s", want)
	}
}
