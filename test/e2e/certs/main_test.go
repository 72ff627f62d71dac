// Package certs proves self-managed certificates through a real API server:
// dsguard starts with no certificate material, makes its CA, fills in the
// caBundle, and rotates the CA without a failed request.
package certs

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

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

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	cluster, err = framework.Start(ctx, framework.Options{
		Log: os.Stderr, Nodes: framework.SmallCluster, SelfManagedCerts: true, DsguardArgs: dsguardArgs,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "certs e2e: cannot start:", err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "certs e2e:", err)
			code = 1
		}
	}()
	cfg := cluster.Config()
	cfg.QPS, cfg.Burst = 100, 200
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "certs e2e:", err)
		return 1
	}
	code = m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "certs e2e: dsguard log:\n%s\n", cluster.DsguardLog())
	}
	return code
}
