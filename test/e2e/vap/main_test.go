// Package vap proves, through a real kube-apiserver, that the generated
// ValidatingAdmissionPolicies give the webhook's verdicts, and that the
// static rules hold while dsguard is down.
package vap

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// cluster is shared by every test of the package.
var cluster *framework.Cluster

func TestMain(m *testing.M) {
	nodes, err := suiteNodes()
	if err != nil {
		fmt.Fprintln(os.Stderr, "vap:", err)
		os.Exit(1)
	}
	os.Exit(framework.RunSuite(m, "vap", framework.Options{Nodes: nodes},
		func(ctx context.Context, s *framework.Suite) (err error) {
			cluster = s.Cluster
			savedWebhooks, err = saveWebhookConfiguration(ctx)
			return err
		}))
}
