package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestNodeChange_RealKubelet: a person taints the real node with a taint
// the agent there does not tolerate; the chart's Node entry warns that the
// agent's Pod stays until restarted and never comes back, and the real
// DaemonSet controller then does not make it again. Meanwhile the real
// kubelet keeps writing its Node, and the API server's own metrics show
// that none of those writes reached dsguard: only the person's did.
func TestNodeChange_RealKubelet(t *testing.T) {
	requireNode(t)
	installed(t, "helm")
	const taint = "e2e.dsguard.io/dedicated=infra:NoSchedule"
	ds := fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-agent
  namespace: monitoring
spec:
  selector:
    matchLabels: {app: node-agent}
  template:
    metadata:
      labels: {app: node-agent}
    spec:
      nodeSelector:
        kubernetes.io/hostname: %s
      tolerations:
        - key: node-role.kubernetes.io/control-plane
          operator: Exists
          effect: NoSchedule
      containers:
        - name: pause
          image: dsguard.local/pause:e2e
`, framework.NodeName)
	mustKubectl(t, ds, "apply", "-f", "-")
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "node-agent")
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		if r := cluster.Kubectl(ctx, "", "taint", "nodes", framework.NodeName, "e2e.dsguard.io/dedicated-"); r.Err != nil &&
			!strings.Contains(r.Stderr, "not found") {
			t.Errorf("cleanup: %v", r.Error())
		}
	})
	pod := func() string {
		return cluster.Kubectl(t.Context(), "", "get", "pods", "-n", "monitoring", "-l", "app=node-agent",
			"-o", `jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name}{end}`).Stdout
	}
	eventually(t, 2*time.Minute, func() bool { return pod() != "" },
		func() string { return mustKubectl(t, "", "get", "pods", "-n", "monitoring", "-o", "wide") })

	calls := func() float64 {
		// Not logged: the whole exposition.
		r := cluster.Kubectl(t.Context(), "", "get", "--raw", "/metrics")
		if r.Err != nil {
			t.Fatal(r.Error())
		}
		v, err := framework.SumMetric([]byte(r.Stdout), "apiserver_admission_webhook_request_total", `name="nodes.dsguard.io"`)
		if err != nil && !strings.Contains(err.Error(), "not served") {
			t.Fatal(err)
		}
		return v
	}
	resourceVersion := func() string {
		return cluster.Kubectl(t.Context(), "", "get", "node", framework.NodeName, "-o", "jsonpath={.metadata.resourceVersion}").Stdout
	}
	before := calls()
	r := kubectl(t, "", "taint", "nodes", framework.NodeName, taint)
	t.Logf("$ kubectl taint nodes %s %s\n%s%s", framework.NodeName, taint, r.Stdout, r.Stderr)
	// Agents with the same outcome share a line: other tests' agents may
	// be named beside this one.
	want := ": taint " + taint + " not tolerated: its Pod keeps running until " +
		"it is restarted, evicted or updated, then never comes back on " + framework.NodeName
	if r.Err != nil || !warnsAbout(r.Stderr, "monitoring/node-agent", want) {
		t.Fatalf("kubectl taint: %v; want the warning \"Warning: node-change: monitoring/node-agent%s\"", r.Err, want)
	}
	// The kubelet writes its Node's status every few seconds: let it
	// write twice more.
	rv, writes := resourceVersion(), 0
	eventually(t, 2*time.Minute, func() bool {
		if now := resourceVersion(); now != rv {
			rv, writes = now, writes+1
		}
		return writes >= 2
	}, func() string { return fmt.Sprintf("the Node changed %d times", writes) })
	if got := calls() - before; got != 1 {
		t.Errorf("the API server called dsguard's Node entry %v times while a person tainted the node once and the kubelet "+
			"wrote it %d times; want 1", got, writes)
	}

	// What the warning said: the Pod runs on; deleted, it is not made again.
	name := pod()
	if name == "" {
		t.Fatal("the agent's Pod stopped running after a NoSchedule taint")
	}
	mustKubectl(t, "", "delete", "pod", "-n", "monitoring", name, "--wait=true", "--timeout=2m")
	eventually(t, time.Minute, func() bool {
		return cluster.Kubectl(t.Context(), "", "get", "daemonset", "-n", "monitoring", "node-agent",
			"-o", "jsonpath={.status.desiredNumberScheduled}/{.status.currentNumberScheduled}").Stdout == "0/0"
	}, func() string { return mustKubectl(t, "", "get", "daemonset,pods", "-n", "monitoring", "-o", "wide") })
	if p := mustKubectl(t, "", "get", "pods", "-n", "monitoring", "-l", "app=node-agent", "-o", "name"); strings.TrimSpace(p) != "" {
		t.Errorf("the controller made the agent again on the tainted node: %s", p)
	}
}

// warnsAbout reports whether a node-change Warning names the DaemonSet
// among those its line groups and says what follows the list.
func warnsAbout(stderr, daemonSet, what string) bool {
	for _, w := range warnings(stderr) {
		list, rest, ok := strings.Cut(strings.TrimPrefix(w, "Warning: node-change: "), ": ")
		if !ok || ": "+rest != what {
			continue
		}
		for _, name := range strings.Split(list, ", ") {
			if name == daemonSet {
				return true
			}
		}
	}
	return false
}
