package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfo(t *testing.T) {
	want := `# HELP dsguard_build_info Always 1; the labels name the running build: version (as dsguard version prints it) and goversion.
# TYPE dsguard_build_info gauge
dsguard_build_info{goversion="` + runtime.Version() + `",version="` + versionString() + `"} 1
`
	if err := testutil.CollectAndCompare(buildInfo(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
