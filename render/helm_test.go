//go:build !norender

package render

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestChart_RendersThisRepositorysChart(t *testing.T) {
	out, err := Chart("../charts/dsguard", Options{Set: []string{"replicaCount=3"}, Namespace: "dsguard-system"})
	if err != nil {
		t.Fatal(err)
	}
	var deployment string
	for _, r := range out {
		if strings.HasSuffix(r.File, "_helpers.tpl") || strings.HasSuffix(r.File, "NOTES.txt") {
			t.Errorf("%s rendered; helm leaves partials and notes out", r.File)
		}
		if r.File == filepath.Join("..", "charts", "dsguard", "templates", "deployment.yaml") {
			deployment = string(r.Content)
		}
	}
	if deployment == "" {
		t.Fatalf("no templates/deployment.yaml among %d rendered files", len(out))
	}
	for _, want := range []string{"replicas: 3", "namespace: dsguard-system", "name: release-name-dsguard"} {
		if !strings.Contains(deployment, want) {
			t.Errorf("deployment lacks %q:\n%s", want, deployment)
		}
	}
}

func TestChart_Errors(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		opts Options
		want string
	}{
		{name: "not a chart", dir: "testdata/kustomize/base", want: "loading the chart"},
		{name: "bad --set", dir: "../charts/dsguard", opts: Options{Set: []string{"a[x]=1"}}, want: "--set a[x]=1"},
		{name: "missing values file", dir: "../charts/dsguard", opts: Options{ValuesFiles: []string{"testdata/none.yaml"}}, want: "none.yaml"},
		{name: "value against the chart's schema", dir: "../charts/dsguard", opts: Options{Set: []string{"replicaCount=many"}}, want: "replicaCount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Chart(tt.dir, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}
