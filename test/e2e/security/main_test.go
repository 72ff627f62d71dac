// Package security replays evasion and abuse attempts against dsguard
// through a real kube-apiserver and the real kubectl (docs/security.md lists
// them with their outcomes): slow clients, an unreachable dsguard in front of
// a CNI fix, self-exemptions, fake narrowing, policy tampering.
package security

import (
	"context"
	"os"
	"strconv"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

var (
	cluster *framework.Cluster
	kube    kubernetes.Interface
	// metricsURL is where dsguard serves /metrics, plain HTTP on localhost.
	metricsURL string
)

// infraNamespaces are created for the fail-open scenarios, and listed as
// failing open (as an operator lists their CNI's namespaces).
var infraNamespaces = []string{"calico-system", "kube-flannel"}

func TestMain(m *testing.M) {
	port, err := framework.FreePort()
	if err != nil {
		panic(err)
	}
	metricsURL = "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
	os.Exit(framework.RunSuite(m, "security e2e", framework.Options{Nodes: framework.SmallCluster,
		FailOpenNamespaces: append([]string{"kube-system"}, infraNamespaces...),
		DsguardArgs:        []string{"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(port), "--metrics-secure=false"}},
		func(ctx context.Context, s *framework.Suite) error {
			cluster, kube = s.Cluster, s.Kube
			for _, ns := range append([]string{"team-a", "team-b", "platform"}, infraNamespaces...) {
				if r := cluster.Kubectl(ctx, "", "create", "namespace", ns); r.Err != nil {
					return r.Error()
				}
			}
			return nil
		}))
}
