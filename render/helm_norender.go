//go:build norender

package render

import "github.com/dsguard/dsguard/policy/manifest"

// ChartsRendered is false in builds without Helm (the container image's,
// built with -tags norender).
const ChartsRendered = false

// Chart refuses: this build leaves Helm's SDK out. The webhook never renders
// charts, and Helm's packages cost every replica memory from their package
// initialisation alone (a JSON Schema compiler's meta-schemas, among others).
func Chart(string, Options) ([]manifest.Rendered, error) { return nil, ErrNoCharts }
