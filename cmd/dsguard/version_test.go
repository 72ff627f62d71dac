package main

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestBuildInfo reads dsguard_build_info as a scrape would: one series of
// value 1 whose labels name this build. Revision and tags come from the
// binary's build settings (a test binary has none: "unknown").
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(buildInfo())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != "dsguard_build_info" || len(families[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, want the one series dsguard_build_info", families)
	}
	m := families[0].GetMetric()[0]
	if m.GetGauge().GetValue() != 1 {
		t.Errorf("dsguard_build_info = %v, want 1", m.GetGauge().GetValue())
	}
	got := labelMap(m.GetLabel())
	for name, want := range map[string]string{"version": versionString(), "goversion": runtime.Version(),
		"goos": runtime.GOOS, "goarch": runtime.GOARCH} {
		if got[name] != want {
			t.Errorf("label %s = %q, want %q", name, got[name], want)
		}
	}
	for _, name := range []string{"revision", "tags", "branch"} {
		if _, ok := got[name]; !ok {
			t.Errorf("no label %s in %v", name, got)
		}
	}
}

func labelMap(pairs []*dto.LabelPair) map[string]string {
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		out[p.GetName()] = p.GetValue()
	}
	return out
}
