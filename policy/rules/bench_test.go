package rules

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

// BenchmarkEvaluate measures one admission verdict against the default
// policy. The budget is 5 µs and 20 allocations per DaemonSet on a 2-core
// machine: the webhook evaluates on every DaemonSet CREATE and UPDATE.
func BenchmarkEvaluate(b *testing.B) {
	cases := []struct {
		name string
		ds   *appsv1.DaemonSet
		// findings is how many findings the case must produce, so that the
		// benchmark cannot silently measure a different verdict.
		findings int
	}{
		{"compliant", sampleDaemonSet(), 0},
		{"node-exporter", nodeExporterDaemonSet(), 4},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			env := policy.Env{Policy: Builtin().Default(), Now: evalNow}
			if got := len(policy.Evaluate(c.ds, env)); got != c.findings {
				b.Fatalf("got %d findings, want %d", got, c.findings)
			}
			b.ReportAllocs()
			testobj.ReportCPUPerOp(b, func() { policy.Evaluate(c.ds, env) })
		})
	}
}

// BenchmarkEvaluateWithNodes is one admission verdict under the default
// policy with the live nodes: the prediction plus every rule.
func BenchmarkEvaluateWithNodes(b *testing.B) {
	for _, n := range testobj.BenchSizes {
		nodes := coverage.NewNodeSnapshot(testobj.CloudNodes(n))
		for _, c := range testobj.BenchDaemonSets() {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, c.Name), func(b *testing.B) {
				env := policy.Env{Policy: Builtin().Default(), Now: testobj.Now, Nodes: nodes}
				b.ReportAllocs()
				testobj.ReportCPUPerOp(b, func() { policy.Evaluate(c.DS, env) })
			})
		}
	}
}
