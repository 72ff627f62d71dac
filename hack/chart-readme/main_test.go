package main

import (
	"os"
	"strings"
	"testing"
)

// TestREADME_MatchesValues fails when charts/dsguard/README.md drifts from the
// comments in charts/dsguard/values.yaml.
func TestREADME_MatchesValues(t *testing.T) {
	const chart = "../../charts/dsguard"
	current, err := os.ReadFile(chart + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Render(chart, current)
	if err != nil {
		t.Fatal(err)
	}
	if string(current) != string(want) {
		t.Fatal("charts/dsguard/README.md is out of date with values.yaml: run `make chart-docs`")
	}
}

func TestParse_Documented(t *testing.T) {
	rows, err := Parse([]byte(`# Section prose, not part of any description.

# -- Replicas.
replicaCount: 2
image:
  # -- The repository,
  # on two lines.
  repository: example.com/dsguard
  # -- (string) Tag; empty means appVersion.
  tag: ""
# -- A whole object, with its default.
resources:
  limits: {memory: 256Mi}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{"replicaCount", "int", "2", "Replicas."},
		{"image.repository", "string", `"example.com/dsguard"`, "The repository, on two lines."},
		{"image.tag", "string", `""`, "Tag; empty means appVersion."},
		{"resources", "object", `{"limits":{"memory":"256Mi"}}`, "A whole object, with its default."},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows = %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, rows[i], want[i])
		}
	}
}

func TestParse_UndocumentedValueIsAnError(t *testing.T) {
	_, err := Parse([]byte("image:\n  # -- Documented.\n  repository: x\n  tag: \"\"\nplain: 1\n"))
	if err == nil {
		t.Fatal("want an error for undocumented values")
	}
	for _, key := range []string{"image.tag", "plain"} {
		if !strings.Contains(err.Error(), key+" has no `# --` comment") {
			t.Errorf("error does not name %s: %v", key, err)
		}
	}
}

func TestRender_NeedsMarkers(t *testing.T) {
	if _, err := Render("../../charts/dsguard", []byte("# no markers\n")); err == nil {
		t.Fatal("want an error without the markers")
	}
}
