// Package e2e proves dsguard's admission behaviour through a real
// kube-apiserver and the real kubectl binary.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// cluster is shared by every test of the package: one control plane per
// package keeps the suite inside CI's budget.
var cluster *framework.Cluster

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	var err error
	cluster, err = framework.Start(ctx, framework.Options{Log: os.Stderr, Nodes: framework.SmallCluster})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot start the control plane:", err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			code = 1
		}
	}()
	fmt.Fprintf(os.Stderr, "e2e: control plane, dsguard and nodes ready in %s\n", time.Since(start).Round(time.Millisecond))
	code = m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: dsguard log:\n%s\n", cluster.DsguardLog())
	}
	return code
}
