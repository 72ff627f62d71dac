package render

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKustomize_Overlay(t *testing.T) {
	out, err := Kustomize("testdata/kustomize/overlays/production")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Fatalf("%d outputs, want one stream", len(out))
	}
	got := string(out[0].Content)
	for _, want := range []string{"namespace: logging", "hostPort: 2020", "maxSurge: 1", "node-role.kubernetes.io/control-plane"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if _, err := Kustomize("testdata"); err == nil {
		t.Error("a directory without a kustomization: want an error")
	}
}

func TestRenderer_Detects(t *testing.T) {
	tests := []struct {
		dir string
		by  string
		ok  bool
	}{
		{"../charts/dsguard", "helm", true},
		{"testdata/kustomize/overlays/production", "kustomize", true},
		{"testdata", "", false},
	}
	for _, tt := range tests {
		_, by, ok, err := Renderer{}.Render(tt.dir)
		if !ChartsRendered && by == "helm" && errors.Is(err, ErrNoCharts) {
			// Detected as a chart, refused by a build without Helm.
			err = nil
		}
		if err != nil || by != tt.by || ok != tt.ok {
			t.Errorf("Render(%s) = %q, %v, %v; want %q, %v", tt.dir, by, ok, err, tt.by, tt.ok)
		}
	}
}

// TestEnclosing: a file of a chart, a subchart's included, belongs to the
// outermost chart, named in the file's own terms; other files belong to none.
func TestEnclosing(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"agent/Chart.yaml", "agent/values.yaml", "agent/templates/ds.yaml",
		"agent/charts/sub/Chart.yaml", "agent/charts/sub/templates/b.yaml", "plain/ds.yaml"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(root)
	tests := []struct{ file, want string }{
		{"agent/templates/ds.yaml", "agent"},
		{"agent/values.yaml", "agent"},
		{"agent/Chart.yaml", "agent"},
		{"agent/charts/sub/templates/b.yaml", "agent"},
		{filepath.Join(root, "agent/templates/ds.yaml"), filepath.Join(root, "agent")},
		{"plain/ds.yaml", ""},
	}
	for _, tt := range tests {
		got, ok := Renderer{}.Enclosing(tt.file)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Enclosing(%s) = %q, %v; want %q", tt.file, got, ok, tt.want)
		}
	}
	t.Chdir(filepath.Join(root, "agent", "templates"))
	if got, _ := (Renderer{}).Enclosing("ds.yaml"); got != ".." {
		t.Errorf("Enclosing(ds.yaml) in the templates folder = %q, want ..", got)
	}
}
