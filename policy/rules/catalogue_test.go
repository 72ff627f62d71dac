package rules

import (
	"bytes"
	"os"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/dsguard/dsguard/policy"
)

// TestCatalogueMarkdown_MatchesDocs fails when docs/rules.md drifts from the
// registry; `make docs` regenerates it.
func TestCatalogueMarkdown_MatchesDocs(t *testing.T) {
	var got bytes.Buffer
	if err := Builtin().WriteCatalogueMarkdown(&got); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("docs/rules.md is out of date with the rule registry: run `make docs`")
	}
}

func TestCatalogue_ListsEveryRule(t *testing.T) {
	var md, text bytes.Buffer
	if err := Builtin().WriteCatalogueMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := Builtin().WriteCatalogueText(&text); err != nil {
		t.Fatal(err)
	}
	for _, r := range Builtin().Rules() {
		if !strings.Contains(md.String(), "\n## "+r.ID+"\n") {
			t.Errorf("markdown catalogue has no section for %s", r.ID)
		}
		if !strings.Contains(text.String(), r.ID) {
			t.Errorf("text catalogue does not list %s", r.ID)
		}
		for _, p := range r.Params {
			if !strings.Contains(md.String(), "`"+p.Name+"`") {
				t.Errorf("markdown catalogue misses parameter %s of %s", p.Name, r.ID)
			}
		}
	}
}

// TestExamplePolicy_IsTheDefaults keeps examples/policy.yaml, which documents
// every key with its default, true to DefaultConfig.
func TestExamplePolicy_IsTheDefaults(t *testing.T) {
	data, err := os.ReadFile("../../examples/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Builtin().ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := configDiff(Builtin().DefaultConfig(), cfg); diff != "" {
		t.Fatalf("examples/policy.yaml differs from the built-in defaults: %s", diff)
	}
}

// configDiff compares two configs as YAML, which treats nil and empty lists
// alike ("users: []" and an absent key mean the same).
func configDiff(want, got *policy.Config) string {
	w, err := yaml.Marshal(want)
	if err != nil {
		return err.Error()
	}
	g, err := yaml.Marshal(got)
	if err != nil {
		return err.Error()
	}
	if bytes.Equal(w, g) {
		return ""
	}
	return diff.Diff(string(w), string(g))
}
