// Package node runs dsguard as a user would: the image built by hack/image,
// installed with `helm install` on a control plane with one real node
// (kubelet, containerd, runc, a bridge CNI network), so that the chart's
// Deployment, Service, probes, security context and PodDisruptionBudget run
// for real and the API server reaches dsguard through its Service.
//
// It needs root and builds containerd (hack/tools.sh --node): `make
// e2e-node` runs it. Elsewhere its tests skip.
package node

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// The cluster and images shared by the package's tests.
var (
	cluster *framework.NodeCluster
	image   framework.Image
	// dsguardBin is the binary inside the image, run on the host for `dsguard audit`.
	dsguardBin string
)

// controlPlaneNode stands for the cluster's control plane (no kubelet).
const controlPlaneNode = "cp-1"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) (code int) {
	if os.Getenv("DSGUARD_E2E_NODE") == "" {
		return m.Run()
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "e2e: node: %v\n", err)
		return 1
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp("", "dsguard-e2e-node-images-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	if dsguardBin, err = framework.BuildImageDsguard(root, dir); err != nil {
		return fail(err)
	}
	var pause framework.Image
	if image, pause, err = framework.BuildNodeImages(root, dir, dsguardBin); err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "e2e: node: built the dsguard and pause images in %s\n", time.Since(start).Round(time.Millisecond))

	// Ctrl-C or a TERM from the runner: take the node down before exiting,
	// since containers, mounts and devices outlive the process.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "e2e: node: %v: stopping the node\n", s)
		if cluster != nil {
			_ = cluster.Stop()
		}
		os.Exit(130)
	}()

	cluster, err = framework.StartNode(ctx, framework.NodeOptions{Log: os.Stderr, Images: []string{image.Archive, pause.Archive}})
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			code = fail(err)
		}
	}()
	if err := cluster.AddControlPlaneNode(ctx, controlPlaneNode); err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "e2e: node: control plane and node ready in %s\n", time.Since(start).Round(time.Millisecond))
	code = m.Run()
	if code != 0 {
		for _, d := range []string{"kubelet", "containerd"} {
			fmt.Fprintf(os.Stderr, "e2e: node: last lines of the %s log:\n%s\n", d, framework.LastLines(cluster.DaemonLog(d), 40))
		}
	}
	return code
}
