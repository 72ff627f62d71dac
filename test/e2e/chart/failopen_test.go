package chart

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFailOpenNamespaces_CNIFixLandsWhileDsguardIsDown installs the chart
// (default failurePolicy Fail) pointed at an address where nothing answers,
// as when a broken CNI has taken dsguard's Pods off the network: a DaemonSet
// in calico-system (a well-known CNI namespace that exists at install, so
// the chart makes it fail open) still lands, while one in monitoring is
// refused because dsguard cannot be reached, and so is one in a kube-flannel
// namespace a tenant creates after the install.
func TestFailOpenNamespaces_CNIFixLandsWhileDsguardIsDown(t *testing.T) {
	const ns, release = "dsguard-lockout", "lockout"
	// Only this release's webhook configuration may be called.
	withoutSuiteWebhook(t)
	mustKubectl(t, "", "create", "namespace", ns)
	// calico-system may exist already (an earlier run of this test): a
	// terminating one is still found at install.
	kubectl(t, "", "create", "namespace", "calico-system")
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

	// A well-known CNI namespace that did not exist at install is not
	// fail-open: a tenant allowed to create namespaces creates kube-flannel
	// and is judged there like anywhere else (here: refused, dsguard being
	// unreachable under failurePolicy Fail), on the webhook entry and in
	// dsguard's own flag alike.
	// Other tests may have created (and left terminating: this control
	// plane runs no namespace controller) other well-known namespaces:
	// check the two this test knows about.
	args := mustKubectl(t, "", "get", "deployment", release+"-dsguard", "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[0].args}")
	m := regexp.MustCompile(`--fail-open-namespaces=([^"]*)"`).FindStringSubmatch(args)
	if m == nil || !slices.Contains(strings.Split(m[1], ","), "calico-system") || slices.Contains(strings.Split(m[1], ","), "kube-flannel") {
		t.Errorf("want --fail-open-namespaces with calico-system (it exists) and without kube-flannel (not yet created), args: %s", args)
	}
	const tenant = "tenant-creates-namespaces"
	mustKubectl(t, "", "create", "clusterrole", tenant, "--verb=create,get,delete", "--resource=namespaces,daemonsets.apps")
	mustKubectl(t, "", "create", "clusterrolebinding", tenant, "--clusterrole="+tenant, "--user="+tenant)
	t.Cleanup(func() {
		kubectl(t, "", "delete", "namespace", "kube-flannel", "--ignore-not-found", "--wait=false")
		kubectl(t, "", "delete", "clusterrolebinding,clusterrole", tenant, "--ignore-not-found")
	})
	if r := kubectl(t, "", "create", "namespace", "kube-flannel", "--as="+tenant); r.Err != nil {
		t.Fatalf("the tenant could not create kube-flannel: %v", r.Error())
	}
	flannel := strings.Replace(nodeExporter, "namespace: monitoring", "namespace: kube-flannel", 1)
	if r := kubectl(t, flannel, "create", "-f", "-", "--as="+tenant); r.ExitCode == 0 || !strings.Contains(r.Stderr, `failed calling webhook "daemonsets.dsguard.io"`) {
		t.Errorf("a DaemonSet in a kube-flannel the tenant created after install must meet the fail-closed entry, got exit %d:\n%s%s", r.ExitCode, r.Stdout, r.Stderr)
	}
}
