package framework

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Suite is what RunSuite hands a package's tests.
type Suite struct {
	Cluster *Cluster
	// Kube is a client-go clientset for the cluster, with room for bursts.
	Kube kubernetes.Interface
}

// RunSuite is the TestMain of an e2e package: it starts one cluster for the
// package (name prefixes its messages), calls setup (which keeps the Suite
// and may prepare shared objects), runs the tests, prints dsguard's log when
// a test failed, and fails the package when dsguard does not shut down
// cleanly. It returns the exit code for os.Exit.
func RunSuite(m *testing.M, name string, opts Options, setup func(ctx context.Context, s *Suite) error) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	start := time.Now()
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	cluster, err := Start(ctx, opts)
	if err != nil {
		return fail(fmt.Errorf("cannot start the control plane: %w", err))
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			code = fail(err)
		}
	}()
	cfg := cluster.Config()
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fail(err)
	}
	if setup != nil {
		if err := setup(ctx, &Suite{Cluster: cluster, Kube: kube}); err != nil {
			return fail(err)
		}
	}
	fmt.Fprintf(os.Stderr, "%s: control plane, dsguard and nodes ready in %s\n", name, time.Since(start).Round(time.Millisecond))
	code = m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "%s: dsguard log:\n%s\n", name, cluster.DsguardLog())
	}
	return code
}
