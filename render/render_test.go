package render

import (
	"errors"
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
