package chart

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestFailOpenNamespaces_CNIFixLandsWhileDsguardIsDown installs the chart
// (default failurePolicy Fail) pointed at an address where nothing answers,
// as when a broken CNI has taken dsguard's Pods off the network: a DaemonSet
// in calico-system (one of the default fail-open namespaces) still lands,
// while one in monitoring is refused because dsguard cannot be reached.
func TestFailOpenNamespaces_CNIFixLandsWhileDsguardIsDown(t *testing.T) {
	const ns, release = "dsguard-lockout", "lockout"
	// Only this release's webhook configuration may be called.
	withoutSuiteWebhook(t)
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, "", "create", "namespace", "calico-system")
	h := helms()[1]
	if r := helm(t, h, "install", release, "charts/dsguard", "--namespace", ns, "--set", "tls.mode=file",
		"--set", fmt.Sprintf("webhook.url=https://127.0.0.1:%d", freePort(t)), "--set", "webhook.caBundle="+caBundle); r.Err != nil {
		t.Fatal(r.Error())
	}
	t.Cleanup(func() { uninstall(t, h, release, ns) })

	nodeExporter := example(t, "node-exporter.yaml")
	cni := strings.Replace(nodeExporter, "namespace: monitoring", "namespace: calico-system", 1)
	if cni == nodeExporter {
		t.Fatal("examples/node-exporter.yaml no longer names namespace monitoring")
	}
	// The configuration takes effect once the API server has loaded it: the
	// refusal in monitoring shows it has.
	var last string
	eventually(t, 30*time.Second, func() bool {
		r := kubectl(t, nodeExporter, "apply", "--dry-run=server", "-f", "-")
		last = r.Stderr
		return r.ExitCode != 0 && strings.Contains(r.Stderr, `failed calling webhook "daemonsets.dsguard.io"`)
	}, func() string { return last })
	if r := kubectl(t, cni, "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("the CNI namespace's DaemonSet was refused while dsguard is down: %v", r.Error())
	}
	mustKubectl(t, "", "delete", "daemonset", "node-exporter", "-n", "calico-system")
}
