// Package certs proves self-managed certificates through a real API server:
// dsguard starts with no certificate material, makes its CA, fills in the
// caBundle, and rotates the CA without a failed request.
package certs

import (
	"context"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

var (
	cluster *framework.Cluster
	kube    kubernetes.Interface
)

// Short lifetimes so that the CA rotates during the test: a CA is renewed
// when a third of its life is left, i.e. every 40s here.
var dsguardArgs = []string{
	"--ca-duration=60s", "--leaf-duration=15s", "--ca-publish-grace=2s", "--ca-sync-interval=500ms",
}

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, "certs e2e", framework.Options{
		Nodes: framework.SmallCluster, SelfManagedCerts: true, DsguardArgs: dsguardArgs,
	}, func(_ context.Context, s *framework.Suite) error {
		cluster, kube = s.Cluster, s.Kube
		return nil
	}))
}
