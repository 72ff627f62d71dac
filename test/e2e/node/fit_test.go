package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// fitAgent is an agent pinned to the real node asking for cpu; exempt, it
// carries an exemption from resource-fit (so that it can be created to
// show what the scheduler does with it).
func fitAgent(name, cpu string, exempt bool) string {
	annotations := ""
	if exempt {
		// An exemption from a deny rule must expire within 90 days.
		annotations = "\n  annotations:\n    exempt.dsguard.io/resource-fit: \"e2e: created to watch the scheduler refuse it; expires=" +
			time.Now().AddDate(0, 0, 30).Format(time.DateOnly) + "\""
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: %[1]s
  namespace: monitoring%[4]s
spec:
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      nodeSelector:
        kubernetes.io/hostname: %[2]s
      tolerations:
        - key: node-role.kubernetes.io/control-plane
          operator: Exists
          effect: NoSchedule
      containers:
        - name: pause
          image: dsguard.local/pause:e2e
          resources:
            requests: {cpu: %[3]s}
`, name, framework.NodeName, cpu, annotations)
}

// TestFit_RealKubelet: on the real node, with the chart's dsguard keeping
// its fit view of the live cluster, an agent that asks for more cpu than
// the node has is refused at admission as never fitting; created under an
// exemption, the real scheduler leaves its Pod Pending for insufficient
// cpu, and a Pod bound straight to the node with the same request is
// refused by the kubelet's own admission (OutOfcpu). An agent that fits is
// admitted without a resource-fit warning and the kubelet runs it.
func TestFit_RealKubelet(t *testing.T) {
	requireNode(t)
	installed(t, "helm")
	alloc := mustKubectl(t, "", "get", "node", framework.NodeName, "-o", "jsonpath={.status.allocatable.cpu}")
	q, err := resource.ParseQuantity(strings.TrimSpace(alloc))
	if err != nil {
		t.Fatalf("the node's allocatable cpu %q: %v", alloc, err)
	}
	tooMuch := resource.NewMilliQuantity(q.MilliValue()+1000, resource.DecimalSI).String()
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "fit-small", "fit-huge")
	cluster.DeleteOnCleanup(t, "pod", "-n", "monitoring", "fit-bound")

	// dsguard is ready only once its fit view has listed the cluster.
	r := kubectl(t, fitAgent("fit-huge", tooMuch, false), "apply", "-f", "-")
	// The chart's API server does not authenticate to dsguard here, so the
	// node is counted, not named.
	want := fmt.Sprintf("[resource-fit] spec.template.spec: cannot land on the one node it covers: never fits on 1 node: "+
		"cpu request above allocatable (cpu: asks %s, at most %s allocatable)", tooMuch, strings.TrimSpace(alloc))
	if r.Err == nil || !strings.Contains(r.Stderr, want) {
		t.Fatalf("an agent asking for %s cpu on a node of %s: %v; want the refusal %q", tooMuch, alloc, r.Err, want)
	}

	mustKubectl(t, fitAgent("fit-huge", tooMuch, true), "apply", "-f", "-")
	pending := func() string {
		return cluster.Kubectl(t.Context(), "", "get", "events", "-n", "monitoring", "--field-selector", "reason=FailedScheduling",
			"-o", "jsonpath={range .items[*]}{.involvedObject.name}: {.message}{\"\\n\"}{end}").Stdout
	}
	eventually(t, 2*time.Minute, func() bool {
		for _, l := range splitLines(pending()) {
			if strings.HasPrefix(l, "fit-huge-") && strings.Contains(l, "Insufficient cpu") {
				return true
			}
		}
		return false
	}, func() string { return pending() + mustKubectl(t, "", "get", "pods", "-n", "monitoring", "-o", "wide") })

	// The kubelet's admission, without the scheduler: the same request
	// bound straight to the node.
	mustKubectl(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: fit-bound, namespace: monitoring}
spec:
  nodeName: %s
  tolerations: [{operator: Exists}]
  containers:
    - name: pause
      image: dsguard.local/pause:e2e
      resources:
        requests: {cpu: %s}
`, framework.NodeName, tooMuch), "apply", "-f", "-")
	status := func() string {
		return cluster.Kubectl(t.Context(), "", "get", "pod", "-n", "monitoring", "fit-bound",
			"-o", "jsonpath={.status.phase}/{.status.reason}").Stdout
	}
	eventually(t, 2*time.Minute, func() bool { return status() == "Failed/OutOfcpu" }, status)

	// A request that fits: admitted without a resource-fit warning, run.
	r = kubectl(t, fitAgent("fit-small", "10m", false), "apply", "-f", "-")
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	for _, w := range warnings(r.Stderr) {
		if strings.Contains(w, "resource-fit") {
			t.Errorf("a 10m agent drew %s", w)
		}
	}
	running := func() string {
		return cluster.Kubectl(t.Context(), "", "get", "pods", "-n", "monitoring", "-l", "app=fit-small",
			"-o", "jsonpath={.items[*].status.phase}").Stdout
	}
	eventually(t, 2*time.Minute, func() bool { return running() == "Running" }, running)
}
