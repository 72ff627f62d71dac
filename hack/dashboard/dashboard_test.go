package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The chart ships what the generator writes: a change to the dashboard's
// code without `go run ./hack/dashboard > charts/dsguard/dashboards/dsguard.json`
// fails here.
func TestDashboard_ChartCopyIsGenerated(t *testing.T) {
	want, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "charts", "dsguard", "dashboards", "dsguard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("charts/dsguard/dashboards/dsguard.json is not what hack/dashboard writes: run\n" +
			"  go run ./hack/dashboard > charts/dsguard/dashboards/dsguard.json")
	}
}
