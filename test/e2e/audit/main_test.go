// Package audit proves `dsguard audit` and the in-cluster auditor against
// the real DaemonSet controller (kube-controller-manager), with Pod
// readiness driven by binding Pods and patching their status (there is no
// kubelet).
package audit

import (
	"context"
	"os"
	"slices"
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

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, "audit e2e", framework.Options{
		Nodes: framework.SmallCluster, ControllerManager: true,
		// The taint eviction controller evicts the Pods a NoExecute taint
		// does not let stay (TestNodeChange_*).
		Controllers: append(slices.Clone(framework.DefaultControllers), "taint-eviction-controller"),
		DsguardArgs: []string{"--audit-interval=1s", "--gap-window=" + gapWindow.String()},
	}, func(ctx context.Context, s *framework.Suite) error {
		cluster, kube = s.Cluster, s.Kube
		return cluster.Kubectl(ctx, "", "create", "namespace", "audit").Error()
	}))
}
