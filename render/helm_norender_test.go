//go:build norender

package render

import (
	"errors"
	"strings"
	"testing"
)

// TestChart_RefusedWithoutHelm: the image's build names what it cannot do
// and the two ways around it, for a chart and for anything else.
func TestChart_RefusedWithoutHelm(t *testing.T) {
	for _, dir := range []string{"../charts/dsguard", "testdata/kustomize/base"} {
		out, err := Chart(dir, Options{})
		if out != nil || !errors.Is(err, ErrNoCharts) {
			t.Errorf("Chart(%s) = %v, %v; want ErrNoCharts", dir, out, err)
		}
	}
	for _, want := range []string{"renders no Helm charts", "release binary", "helm template"} {
		if !strings.Contains(ErrNoCharts.Error(), want) {
			t.Errorf("ErrNoCharts %q does not say %q", ErrNoCharts, want)
		}
	}
}
