package security

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestCNILockout_InfrastructureUpdateSucceedsWhileDsguardIsUnreachable
// installs the chart's webhook configuration a second time, pointed at a
// port where nothing listens: the broken-CNI day, when dsguard's Pods have
// lost the network. A DaemonSet update in calico-system must still land
// (its entry fails open), while a DaemonSet elsewhere is refused by the
// fail-closed entry, which proves the unreachable dsguard was called.
func TestCNILockout_InfrastructureUpdateSucceedsWhileDsguardIsUnreachable(t *testing.T) {
	ctx := t.Context()
	// The fix to the CNI DaemonSet already exists before the outage.
	calico := example(t, "node-exporter-tolerations.yaml", "calico-node", "calico-system")
	if r := kubectl(t, toYAML(t, calico), "apply", "-f", "-"); r.Err != nil {
		t.Fatal(r.Error())
	}

	port := freePort(t)
	r := cluster.Helm(ctx, "template", "unreachable", "charts/dsguard", "--namespace", framework.Namespace,
		"--set", fmt.Sprintf("webhook.url=https://127.0.0.1:%d", port),
		// Rendered without a cluster, the chart finds no CNI namespace:
		// the operator lists theirs.
		"--set", "webhook.failOpenNamespaces={kube-system,"+strings.Join(infraNamespaces, ",")+"}",
		"--show-only", "templates/validatingwebhookconfiguration.yaml")
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	if a := kubectl(t, r.Stdout, "apply", "-f", "-"); a.Err != nil {
		t.Fatal(a.Error())
	}
	defer func() {
		kubectl(t, "", "delete", "validatingwebhookconfiguration", "unreachable-dsguard", "--ignore-not-found")
		// The API server's view of webhook configurations lags a little:
		// wait until writes go through again, for the tests that follow.
		probe := toYAML(t, compliant(t, "agent", "team-b"))
		deadline := time.Now().Add(30 * time.Second)
		for cluster.Kubectl(ctx, probe, "apply", "--dry-run=server", "-f", "-").ExitCode != 0 {
			if time.Now().After(deadline) {
				t.Error("writes still fail 30s after the unreachable webhook configuration was deleted")
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()

	// The CNI fix: a new image. It lands, with the real dsguard's answer
	// and nothing from the unreachable one.
	fixed := strings.Replace(toYAML(t, calico), "quay.io/prometheus/node-exporter:v1.9.1", "quay.io/prometheus/node-exporter:v1.9.2", 1)
	if !strings.Contains(fixed, "v1.9.2") {
		t.Fatalf("the example's image changed; update the test:\n%s", fixed)
	}
	if a := kubectl(t, fixed, "apply", "-f", "-"); a.ExitCode != 0 {
		t.Fatalf("the CNI DaemonSet update was refused while dsguard is unreachable:\n%s", a.Stderr)
	}

	// Outside the fail-open list the same outage refuses the write: the
	// unreachable webhook was really in the path.
	other := toYAML(t, compliant(t, "agent", "team-b"))
	a := kubectl(t, other, "apply", "--dry-run=server", "-f", "-")
	if a.ExitCode == 0 || !strings.Contains(a.Stderr, "failed calling webhook") {
		t.Fatalf("team-b: want the fail-closed entry to refuse while dsguard is unreachable, got exit %d:\n%s", a.ExitCode, a.Stderr)
	}
}

// TestFailOpenNamespace_DenyBecomesWarning: in an infrastructure namespace a
// DaemonSet that would be denied elsewhere is admitted with the warning.
func TestFailOpenNamespace_DenyBecomesWarning(t *testing.T) {
	ds := example(t, "node-exporter.yaml", "flannel-agent", "kube-flannel")
	r := kubectl(t, toYAML(t, ds), "apply", "--dry-run=server", "-f", "-")
	if r.ExitCode != 0 {
		t.Fatalf("kube-flannel: want admitted with a warning, got exit %d:\n%s", r.ExitCode, r.Stderr)
	}
	ws := strings.Join(warnings(r), "\n")
	if !strings.Contains(ws, "control-plane-toleration: no toleration") {
		t.Errorf("want the control-plane-toleration finding as a warning, got:\n%s", ws)
	}
}
