// Package faults injects the faults a webhook meets in production and proves
// that dsguard loses nothing and judges nothing wrongly through them: an API
// server restart under a steady stream of writes, the leader's API access cut,
// a rolling restart of both replicas under load, a policy edited a hundred
// times a minute, and a soak of all of it with a certificate rotation. dsguard
// runs as two processes behind one address, as a Deployment behind the
// webhook configuration's Service, each reaching the API server through its
// own proxy so that one can be cut off.
package faults

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

var (
	cluster *framework.Cluster
	// kube is an admin client whose requests carry a warnings collector in
	// their context (see withWarnings).
	kube kubernetes.Interface
)

// soakFor is the soak's length: a minute in `make test`, ten minutes with
// `make soak`.
var soakFor = flag.Duration("soak", 60*time.Second, "how long TestSoak runs (make soak: 10m)")

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, "faults e2e", framework.Options{
		Nodes: framework.SmallCluster, Replicas: 2,
		// controller-runtime's lease timing rather than dsguard's slower
		// defaults: TestLeaderCut_WebhookServesAndLeaseMoves cuts the leader off for 30 seconds
		// and wants the lease to move within them.
		DsguardArgs: []string{"--audit-lease-duration=15s", "--audit-lease-renew-deadline=10s", "--audit-lease-retry-period=2s"},
	}, func(_ context.Context, s *framework.Suite) error {
		cluster = s.Cluster
		cfg := cluster.Config()
		cfg.QPS, cfg.Burst = 500, 1000
		cfg.WarningHandlerWithContext = warningCollector{}
		var err error
		kube, err = kubernetes.NewForConfig(rest.CopyConfig(cfg))
		return err
	}))
}
