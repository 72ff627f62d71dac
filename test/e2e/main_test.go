// Package e2e proves dsguard's admission behaviour through a real
// kube-apiserver and the real kubectl binary.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// cluster is shared by every test of the package: one control plane per
// package keeps the suite inside CI's budget. Each test creates what it
// needs and removes it (and puts the default policy back) when it ends, so
// that the tests pass in any order and alone (go test -shuffle, -run).
var cluster *framework.Cluster

// metricsURL is where the suite's dsguard serves /metrics, plain HTTP on
// localhost: the auditor's gauges say what it has seen of a DaemonSet.
var metricsURL string

func TestMain(m *testing.M) {
	port, err := framework.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	metricsURL = "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
	os.Exit(framework.RunSuite(m, "e2e", framework.Options{Nodes: framework.SmallCluster,
		DsguardArgs: []string{"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(port), "--metrics-secure=false"}},
		func(_ context.Context, s *framework.Suite) error { cluster = s.Cluster; return nil }))
}
