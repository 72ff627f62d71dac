// Package audit proves `dsguard audit` and the in-cluster auditor against
// the real DaemonSet controller (kube-controller-manager), with Pod
// readiness driven by binding Pods and patching their status (there is no
// kubelet).
package audit

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

// gapWindow is short so that a gap turns persistent within the test.
const gapWindow = 4 * time.Second

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	cluster, err = framework.Start(ctx, framework.Options{
		Log: os.Stderr, Nodes: framework.SmallCluster, ControllerManager: true,
		DsguardArgs: []string{"--audit-interval=1s", "--gap-window=" + gapWindow.String()},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "audit e2e: cannot start:", err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "audit e2e:", err)
			code = 1
		}
	}()
	cfg := cluster.Config()
	cfg.QPS, cfg.Burst = 200, 400
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "audit e2e:", err)
		return 1
	}
	if r := cluster.Kubectl(ctx, "", "create", "namespace", "audit"); r.Err != nil {
		fmt.Fprintln(os.Stderr, "audit e2e:", r.Error())
		return 1
	}
	code = m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "audit e2e: dsguard log:\n%s\n", cluster.DsguardLog())
	}
	return code
}
