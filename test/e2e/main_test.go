// Package e2e proves dsguard's admission behaviour through a real
// kube-apiserver and the real kubectl binary.
package e2e

import (
	"context"
	"os"
	"testing"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// cluster is shared by every test of the package: one control plane per
// package keeps the suite inside CI's budget.
var cluster *framework.Cluster

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, "e2e", framework.Options{Nodes: framework.SmallCluster},
		func(_ context.Context, s *framework.Suite) error { cluster = s.Cluster; return nil }))
}
