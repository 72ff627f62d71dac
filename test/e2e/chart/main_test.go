// Package chart proves the Helm chart against a real kube-apiserver: every
// rendered object is valid on the server, `helm install` with Helm 3 and
// Helm 4 gives a webhook configuration through which kubectl is rejected and
// warned, and the chart's ServiceAccount can do what dsguard needs and
// nothing more (a `kubectl auth can-i` matrix, and dsguard itself running
// with exactly that identity).
//
// envtest's kube-apiserver runs with --authorization-mode=RBAC (its default),
// so impersonated `can-i` answers are the RBAC answers a cluster would give.
// There is no kubelet: the chart's Pods never run, so the webhook
// configuration is pointed at a dsguard started on this machine instead.
package chart

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// cluster is shared by every test of the package: one control plane.
var cluster *framework.Cluster

// kube is a client-go clientset for the cluster.
var kube kubernetes.Interface

// caBundle is the CA of the locally started dsguard's serving certificate,
// base64-encoded, as framework.Start installed it.
var caBundle string

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, "e2e: chart", framework.Options{Nodes: framework.SmallCluster, StaticConfinement: []string{vapUser}},
		func(ctx context.Context, s *framework.Suite) error {
			cluster, kube = s.Cluster, s.Kube
			r := cluster.Kubectl(ctx, "", "get", "validatingwebhookconfiguration", "dsguard",
				"-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
			if r.Err != nil || r.Stdout == "" {
				return fmt.Errorf("cannot read the CA of dsguard's serving certificate: %v", r.Error())
			}
			caBundle = r.Stdout
			return nil
		}))
}
