// Package fit proves coverage/fit's predictions against the real
// kube-scheduler: random nodes (several to a zone), bound Pods, nominated
// Pods, PriorityClasses and DaemonSets (new ones, and template updates
// under maxUnavailable and maxSurge) go to a real kube-apiserver with the
// real DaemonSet controller and scheduler, and for every node the outcome
// the scheduler reaches (bound, bound after preempting which Pods, or
// Pending with which reasons) must equal the prediction. Then every other
// Pod is deleted and the Pending agents are made again: those predicted
// not to fit must land, those predicted never to fit must stay Pending.
//
// The nodes are heartbeat Nodes: the test writes their status (Ready,
// allocatable) and lifts the not-ready taint, as a kubelet and the node
// lifecycle controller would; no node lifecycle controller runs, so nothing
// marks them NotReady later and no Lease needs renewing. No kubelet runs
// Pods, so the test plays its part where the scheduler depends on it: it
// marks the bound Pods Running with a start time (preemption spares the
// longest running first), the old Pods of an update ready as well (the
// controller keeps a surged-over Pod only while it is ready), and
// finalizes the Pods the scheduler and the controller delete.
package fit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

var (
	client    kubernetes.Interface
	scheduler *framework.Process
	kcm       *framework.ControllerManager
	// kubectl, kubeconfig and dsguardBin run the CLI half: a cluster dump
	// taken with the real kubectl, judged by dsguard check.
	kubectl, kubeconfig, dsguardBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	start := time.Now()
	root, err := framework.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fit:", err)
		return 1
	}
	tools, err := framework.ToolsDir(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fit:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "dsguard-fit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fit:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	plane, err := framework.StartControllerPlane(tools)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fit:", err)
		return 1
	}
	defer plane.Stop()
	env, cfg := plane.Env, plane.Config
	kcm = plane.KCM
	kubectl, kubeconfig = filepath.Join(tools, "kubectl"), filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "fit:", err)
		return 1
	}
	if dsguardBin, err = framework.BuildDsguard(root, dir); err != nil {
		fmt.Fprintln(os.Stderr, "fit:", err)
		return 1
	}

	if scheduler, err = startScheduler(tools, dir, env.KubeConfig); err != nil {
		fmt.Fprintln(os.Stderr, "fit:", err)
		return 1
	}
	defer scheduler.Stop()

	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.WarningHandler = rest.NoWarnings{}
	if client, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "fit:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "fit: kube-apiserver, etcd, kube-controller-manager and kube-scheduler up in %s\n",
		time.Since(start).Round(time.Millisecond))

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "fit: kube-scheduler log (last lines):\n%s\n", framework.LastLines(scheduler.Log(), 60))
	}
	return code
}

// startScheduler starts the real kube-scheduler with its default profile
// and a client rate limit that does not slow hundreds of bindings down.
func startScheduler(tools, dir string, kubeconfig []byte) (*framework.Process, error) {
	kc := filepath.Join(dir, "kube-scheduler.kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "kube-scheduler.yaml")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{
		"apiVersion: kubescheduler.config.k8s.io/v1",
		"kind: KubeSchedulerConfiguration",
		"clientConnection:",
		"  kubeconfig: " + kc,
		"  qps: 500",
		"  burst: 1000",
		"leaderElection:",
		"  leaderElect: false",
		"",
	}, "\n")), 0o600); err != nil {
		return nil, err
	}
	p, err := framework.StartProcess(dir, filepath.Join(tools, "kube-scheduler"), "--config="+conf, "--secure-port=0", "--v=2")
	if err != nil {
		return nil, fmt.Errorf("starting kube-scheduler: %w", err)
	}
	// A bad flag or configuration ends it at once: a second tells such a
	// start from a running scheduler (one that fails later fails the test,
	// which prints its log).
	time.Sleep(time.Second)
	if err := p.ExitError(); err == nil || err.Error() != "still running" {
		return nil, fmt.Errorf("kube-scheduler exited at once:\n%s", framework.LastLines(p.Log(), 40))
	}
	return p, nil
}

// waitFor polls cond until it is true or ctx ends.
func waitFor(ctx context.Context, every time.Duration, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
