// Command demo walks through dsguard's admission behaviour on a real control
// plane: it starts etcd and kube-apiserver, runs `dsguard serve`, installs the
// chart's webhook configuration and drives the real kubectl, narrating each
// step and showing kubectl's actual output. `make demo` runs it
// (hack/demo.sh), after the offline verdicts it shows while this program and
// the control plane build.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

func main() {
	// envtest logs through controller-runtime's logger; unset, the first
	// use prints a stack trace ("log.SetLogger(...) was never called") in
	// the middle of the narration. Errors still reach the terminal; info
	// lines (verbosity 0 and up) do not.
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) },
		funcr.Options{Verbosity: -1}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo:", err)
		os.Exit(1)
	}
}

type demo struct {
	ctx     context.Context
	cluster *framework.Cluster
	step    int
}

func (d *demo) say(format string, args ...any) {
	d.step++
	fmt.Printf("\n\033[1m==> %d. %s\033[0m\n", d.step, fmt.Sprintf(format, args...))
}

// kubectl runs kubectl, prints the command line and its real output, and
// checks the verdict the narration promised.
func (d *demo) kubectl(wantExit int, stdin, display string, args ...string) error {
	if display == "" {
		display = "kubectl " + strings.Join(args, " ")
	}
	fmt.Printf("$ %s\n", display)
	r := d.cluster.Kubectl(d.ctx, stdin, args...)
	if d.ctx.Err() != nil {
		return errors.New("interrupted")
	}
	fmt.Print(r.Stdout, r.Stderr)
	if r.ExitCode != wantExit {
		return fmt.Errorf("unexpected: %q exited %d, expected %d", display, r.ExitCode, wantExit)
	}
	return d.ctx.Err()
}

func (d *demo) example(name string, replacements ...string) (string, error) {
	data, err := os.ReadFile(filepath.Join(d.cluster.Root, "examples", name))
	return strings.NewReplacer(replacements...).Replace(string(data)), err
}

// waitForVerdict waits until a dry-run of manifest (a DaemonSet that does
// not exist, so the dry-run is a CREATE) exits with wantExit, i.e. until
// dsguard enforces a policy just applied, and says how long it took.
func (d *demo) waitForVerdict(manifest string, wantExit int) time.Duration {
	start := time.Now()
	for time.Since(start) < 20*time.Second && d.ctx.Err() == nil {
		if d.cluster.Kubectl(d.ctx, manifest, "apply", "--dry-run=server", "-f", "-").ExitCode == wantExit {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start).Round(10 * time.Millisecond)
}

func policyConfigMap(policy string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dsguard-policy\n  namespace: " +
		framework.Namespace + "\n  labels:\n    dsguard.io/policy: \"true\"\ndata:\n  policy.yaml: |\n")
	for _, line := range strings.Split(strings.TrimRight(policy, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

func run(ctx context.Context) error {
	fmt.Println("The live part: a real kube-apiserver, dsguard serving its webhook, and kubectl being rejected and warned.")
	start := time.Now()
	cluster, err := framework.Start(ctx, framework.Options{Log: os.Stdout, Nodes: framework.SmallCluster})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\n==> shutting down dsguard, kube-apiserver and etcd")
		// After Ctrl-C dsguard got the interrupt too; only a plain
		// shutdown must be clean.
		if err := cluster.Stop(); err != nil && ctx.Err() == nil {
			fmt.Println("demo:", err)
		}
		fmt.Println("done.")
	}()
	fmt.Printf("cluster ready in %s\n", time.Since(start).Round(100*time.Millisecond))
	d := &demo{ctx: ctx, cluster: cluster}

	d.say("The cluster: one control-plane node tainted NoSchedule, three workers (one with a GPU)")
	if err := d.kubectl(0, "", "", "get", "nodes", "-o",
		"custom-columns=NAME:.metadata.name,TAINTS:.spec.taints[*].key,GPU:.metadata.labels.gpu"); err != nil {
		return err
	}

	d.say("node-exporter without a control-plane toleration would skip cp-1: dsguard denies it")
	if err := d.kubectl(1, "", "", "apply", "-f", "examples/node-exporter.yaml"); err != nil {
		return err
	}

	d.say("maxSurge with hostPort 9100: the surge Pod could never bind its port, so the rollout would wedge")
	if err := d.kubectl(1, "", "", "apply", "-f", "examples/node-exporter-surge.yaml"); err != nil {
		return err
	}

	d.say("The same node-exporter tolerating every taint (operator: Exists) is admitted")
	if err := d.kubectl(0, "", "", "apply", "-f", "examples/node-exporter-tolerations.yaml"); err != nil {
		return err
	}

	d.say("maxUnavailable 50%%: admitted, with a warning that half the fleet may go blind during a rollout")
	if err := d.kubectl(0, "", "", "apply", "-f", "examples/log-shipper-half-fleet.yaml"); err != nil {
		return err
	}

	d.say("A second exporter on host port 9100, beside node-exporter which holds it on every node: its Pods could never start, so dsguard denies it")
	copyExporter, err := d.example("node-exporter-tolerations.yaml", "\n  name: node-exporter\n", "\n  name: exporter-copy\n")
	if err != nil {
		return err
	}
	if err := d.kubectl(1, copyExporter, "kubectl apply -f exporter-copy.yaml   # node-exporter-tolerations.yaml, renamed", "apply", "-f", "-"); err != nil {
		return err
	}

	d.say("Server-side dry-run and server-side apply get the same verdict (a new DaemonSet, agent-b)")
	agentB, err := d.example("node-exporter.yaml", "\n  name: node-exporter\n", "\n  name: agent-b\n", "9100", "9103")
	if err != nil {
		return err
	}
	if err := d.kubectl(1, agentB, "kubectl apply --dry-run=server -f agent-b.yaml   # node-exporter.yaml, renamed, on port 9103", "apply", "--dry-run=server", "-f", "-"); err != nil {
		return err
	}
	if err := d.kubectl(1, agentB, "kubectl apply --server-side -f agent-b.yaml", "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}

	d.say("An operator edits the policy ConfigMap: control-plane-toleration now only warns")
	warnPolicy := "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  control-plane-toleration:\n    action: warn\n"
	if err := d.kubectl(0, policyConfigMap(warnPolicy), "kubectl apply -f dsguard-policy.yaml   # rules.control-plane-toleration.action: warn", "apply", "-f", "-"); err != nil {
		return err
	}
	// On ports of their own: node-exporter holds 9100 on every node.
	legacy, err := d.example("node-exporter.yaml", "\n  name: node-exporter\n", "\n  name: legacy-exporter\n", "9100", "9101")
	if err != nil {
		return err
	}
	probe, err := d.example("node-exporter.yaml", "\n  name: node-exporter\n", "\n  name: policy-probe\n", "9100", "9102")
	if err != nil {
		return err
	}
	fmt.Printf("(dsguard enforced the new policy %s after the edit)\n", d.waitForVerdict(probe, 0))
	if err := d.kubectl(0, legacy, "kubectl apply -f legacy-exporter.yaml   # node-exporter.yaml, renamed, on port 9101", "apply", "-f", "-"); err != nil {
		return err
	}

	d.say("A broken policy edit is refused at apply time, with its line and field")
	broken := "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  max-unavailable:\n    parameters:\n      maxPercnt: 10\n"
	if err := d.kubectl(1, policyConfigMap(broken), "kubectl apply -f dsguard-policy.yaml   # line 6 says maxPercnt", "apply", "-f", "-"); err != nil {
		return err
	}

	d.say("The policy goes back to the defaults; legacy-exporter, created while the rule only warned, still lacks the toleration")
	if err := d.kubectl(0, policyConfigMap("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"), "kubectl apply -f dsguard-policy.yaml   # defaults", "apply", "-f", "-"); err != nil {
		return err
	}
	fmt.Printf("(dsguard enforced the defaults %s after the edit)\n", d.waitForVerdict(probe, 1))
	d.say("A label-only change to it is not blocked by the old problem: admitted with a warning")
	if err := d.kubectl(0, "", "", "label", "daemonset", "-n", "monitoring", "legacy-exporter", "team=observability"); err != nil {
		return err
	}

	return nil
}
