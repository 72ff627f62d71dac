package vap

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// notExpressedMarkdown is the per-rule list docs/modes.md carries between
// its not-expressed markers.
func notExpressedMarkdown() string {
	var b strings.Builder
	for _, id := range notExpressedIDs() {
		b.WriteString("- **" + id + "**: " + strings.Join(notExpressed(id), "; ") + ".\n")
	}
	return b.String()
}

// TestNotExpressed_IsInTheDocs keeps docs/modes.md in step with what the
// generated policies say they cannot check.
func TestNotExpressed_IsInTheDocs(t *testing.T) {
	const begin, end = "<!-- not-expressed: generated from vap, kept by TestNotExpressed_IsInTheDocs -->\n", "<!-- end not-expressed -->"
	got, err := between("../docs/modes.md", begin, end)
	if err != nil {
		t.Fatal(err)
	}
	if want := notExpressedMarkdown(); got != want {
		t.Errorf("docs/modes.md's list of what CEL cannot express is out of date; it should read:\n%s", want)
	}
}

// between returns the text of a file between two marker lines.
func between(file, begin, end string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("%s lacks the markers %q and %q", file, begin, end)
	}
	return doc[i+len(begin) : j], nil
}

// replaceBetween replaces the text of a file between two marker lines.
func replaceBetween(file, begin, end, text string) error {
	old, err := between(file, begin, end)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	doc := strings.Replace(string(data), begin+old+end, begin+text+end, 1)
	return os.WriteFile(file, []byte(doc), 0o644)
}
