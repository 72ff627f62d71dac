package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// fitNodes are two nodes of 2 cpu that only the fit scenarios' DaemonSets
// select (and whose taint keeps every other scenario's DaemonSets off).
var fitNodes = []framework.Node{
	{Name: "fit-1", Labels: map[string]string{"pool": "fit"}, Taints: []string{"dedicated=fit:NoSchedule"}},
	{Name: "fit-2", Labels: map[string]string{"pool": "fit"}, Taints: []string{"dedicated=fit:NoSchedule"}},
}

// fitAgent is node-exporter on the fit nodes, asking for cpu, with an
// optional priorityClassName; each name binds a port of its own, so that
// host-port-conflict has nothing to say.
func fitAgent(t *testing.T, name, cpu, class string) string {
	port := map[string]string{"fit-agent": "9101", "fit-agent-big": "9102", "fit-agent-priority": "9103"}[name]
	spec := "      hostNetwork: true\n      nodeSelector:\n        pool: fit\n"
	if class != "" {
		spec += "      priorityClassName: " + class + "\n"
	}
	return manifest(t, "node-exporter-tolerations.yaml", "\n  name: node-exporter\n", "\n  name: "+name+"\n",
		"      hostNetwork: true\n", spec, "9100", port,
		"            - --path.rootfs=/host\n", "            - --path.rootfs=/host\n          resources:\n            requests:\n              cpu: "+cpu+"\n")
}

// warnings returns the Warning lines of a kubectl run.
func warnings(r framework.Result) []string {
	var out []string
	for _, line := range strings.Split(r.Stderr, "\n") {
		if w, ok := strings.CutPrefix(line, "Warning: "); ok {
			out = append(out, w)
		}
	}
	return out
}

// withPrefix returns the warning that starts with prefix, or "".
func withPrefix(ws []string, prefix string) string {
	for _, w := range ws {
		if strings.HasPrefix(w, prefix) {
			return w
		}
	}
	return ""
}

// TestFit_AdmissionSaysWhereTheAgentLands: dsguard serve keeps the nodes'
// allocatable and the Pods bound to them (its fit view) and judges
// resource-fit and priority-class when kubectl applies a DaemonSet: a Pod
// that fits on no node it covers is refused, one that stays Pending on some
// is admitted with a warning naming them and why, a priority not above the
// workloads' is warned about, and a PriorityClass above them lets the agent
// preempt, so it lands everywhere and nothing is said.
func TestFit_AdmissionSaysWhereTheAgentLands(t *testing.T) {
	createNodes(t, fitNodes...)
	for _, n := range fitNodes {
		r := kubectl(t, `{"status":{"capacity":{"cpu":"2","memory":"4Gi","pods":"110"},"allocatable":{"cpu":"2","memory":"4Gi","pods":"110"}}}`,
			"patch", "node", n.Name, "--subresource=status", "--type=merge", "--patch-file=/dev/stdin")
		if r.ExitCode != 0 {
			t.Fatalf("setting %s's allocatable: %s", n.Name, r.Stderr)
		}
	}
	cluster.DeleteOnCleanup(t, "priorityclass", "fit-workload", "fit-agents")
	classes := "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: fit-workload}\nvalue: 1000\n---\n" +
		"apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: fit-agents}\nvalue: 2000\n"
	if r := kubectl(t, classes, "create", "-f", "-"); r.ExitCode != 0 {
		t.Fatalf("creating the PriorityClasses: %s", r.Stderr)
	}
	// A workload Pod bound to fit-1 (no scheduler runs here: it is bound
	// by its nodeName, as the scheduler would bind it) holding 1800m of
	// its 2 cpu.
	cluster.DeleteOnCleanup(t, "pod", "-n", "monitoring", "fit-filler", "--grace-period=0", "--force")
	filler := "apiVersion: v1\nkind: Pod\nmetadata: {name: fit-filler, namespace: monitoring}\nspec:\n" +
		"  nodeName: fit-1\n  priorityClassName: fit-workload\n  tolerations: [{operator: Exists}]\n" +
		"  containers: [{name: app, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 1800m}}}]\n"
	if r := kubectl(t, filler, "create", "-f", "-"); r.ExitCode != 0 {
		t.Fatalf("creating the filler Pod: %s", r.Stderr)
	}

	// dsguard's view follows the cluster by watches: a dry run tells when
	// it has seen the filler (the warning names fit-1).
	small := fitAgent(t, "fit-agent", "500m", "")
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "fit-agent", "fit-agent-big", "fit-agent-priority")
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := kubectl(t, small, "apply", "--dry-run=server", "-f", "-")
		if strings.Contains(withPrefix(warnings(r), "resource-fit: "), "fit-1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dsguard's fit view did not see the filler Pod within 20s; dsguard log:\n%s",
				framework.LastLines(cluster.DsguardLog(), 40))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Pending on fit-1, where 200m is free: admitted, with both warnings.
	r := kubectl(t, small, "apply", "-f", "-")
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "daemonset.apps/fit-agent created") {
		t.Fatalf("the agent that fits on fit-2 was not created: %s", r.Stderr)
	}
	ws := warnings(r)
	fitWarn := withPrefix(ws, "resource-fit: stays Pending on 1 of 2 nodes it covers: does not fit on 1 node (fit-1): ")
	prioWarn := withPrefix(ws, "priority-class: no priorityClassName: its Pods get priority 0, not above 1000, "+
		"the priority of monitoring/fit-filler (the most important Pod no DaemonSet controls)")
	if fitWarn == "" || prioWarn == "" || len(ws) != 2 {
		t.Fatalf("warnings = %q, want a resource-fit warning naming fit-1 and a priority-class warning naming the filler", ws)
	}
	for _, want := range []string{"cpu", "500m", "200m"} {
		if !strings.Contains(fitWarn, want) {
			t.Errorf("the resource-fit warning lacks %q: %s", want, fitWarn)
		}
	}
	// A warning line is cut at 256 characters: the figure to reach must
	// come before the cut.
	if !strings.Contains(prioWarn, "it needs 1001 or more to preempt such Pods") {
		t.Errorf("the priority-class warning does not say what priority the agent needs: %s", prioWarn)
	}

	// Offline, from what dsguard nodes --fit saved: the same verdict, and
	// a file without the filler's image.
	saved := cluster.RunDsguard(t.Context(), "nodes", "--fit")
	if saved.ExitCode != 0 || strings.Contains(saved.Stdout, "registry.k8s.io/pause") || !strings.Contains(saved.Stdout, "fit-filler") {
		t.Fatalf("dsguard nodes --fit: exit %d, %s\n%s", saved.ExitCode, saved.Stderr, saved.Stdout)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(saved.Stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte(small), 0o600); err != nil {
		t.Fatal(err)
	}
	offline := framework.Run(t.Context(), dir, "", nil, cluster.Dsguard, "check", "agent.yaml", "--nodes", "cluster.yaml", "-o", "json")
	for _, want := range []string{"stays Pending on 1 of 2 nodes it covers: does not fit on 1 node (fit-1)", "500m", "200m",
		"the priority of monitoring/fit-filler"} {
		if !strings.Contains(offline.Stdout, want) {
			t.Errorf("dsguard check --nodes with the saved file lacks %q (exit %d):\n%s%s", want, offline.ExitCode, offline.Stdout, offline.Stderr)
		}
	}

	// 3 cpu fits on neither node, whatever it preempts: refused.
	r = kubectl(t, fitAgent(t, "fit-agent-big", "3", "fit-agents"), "apply", "-f", "-")
	wantDenied(t, r, dsWebhook, "DaemonSet monitoring/fit-agent-big breaks 1 dsguard coverage rule",
		"[resource-fit] spec.template.spec: lands on none of the 2 nodes it covers: never fits on 2 nodes (fit-1, fit-2): ")
	if !strings.Contains(r.Stderr, "cpu") {
		t.Errorf("the refusal does not say which resource: %s", r.Stderr)
	}

	// Above the workloads' priority the agent preempts the filler on
	// fit-1: it lands on both nodes, and neither rule has anything to say.
	r = kubectl(t, fitAgent(t, "fit-agent-priority", "500m", "fit-agents"), "apply", "-f", "-")
	wantAllowed(t, r, "daemonset.apps/fit-agent-priority created")

	// The filler gone, the first agent fits everywhere: an update (a
	// larger request, its own old Pods counted as gone) says nothing.
	if r := kubectl(t, "", "delete", "pod", "-n", "monitoring", "fit-filler", "--grace-period=0", "--force"); r.ExitCode != 0 {
		t.Fatalf("deleting the filler: %s", r.Stderr)
	}
	bigger := fitAgent(t, "fit-agent", "1", "")
	for deadline := time.Now().Add(20 * time.Second); ; {
		r := kubectl(t, bigger, "apply", "--dry-run=server", "-f", "-")
		if r.ExitCode == 0 && len(warnings(r)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the filler went, the update still warns or fails: %s", r.Stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// conflictAgent is node-exporter (hostNetwork, port 9100) under a new name,
// on the nodes nodeSelector picks.
func conflictAgent(t *testing.T, name, nodeSelector string) string {
	return manifest(t, "node-exporter-tolerations.yaml", "\n  name: node-exporter\n", "\n  name: "+name+"\n",
		"      hostNetwork: true\n", "      hostNetwork: true\n      nodeSelector:\n        "+nodeSelector+"\n")
}

// loner avoids node-exporter's Pods (any of the above) on its node, binds
// no host port, and runs on the conflict nodes.
const loner = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: loner, namespace: monitoring}
spec:
  selector:
    matchLabels: {app: loner}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata:
      labels: {app: loner}
    spec:
      nodeSelector: {pool: conflict}
      tolerations: [{operator: Exists}]
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              namespaces: [monitoring]
              labelSelector:
                matchLabels: {app.kubernetes.io/name: node-exporter}
      containers:
        - name: loner
          image: registry.k8s.io/pause:3.10
          readinessProbe:
            exec: {command: [/pause]}
`

// TestAgentConflicts_AtAdmission: with one agent holding host port 9100 on
// conflict-1, a second agent that wants the port there is refused when
// that is every node it covers and warned about when it covers conflict-2
// too; an agent whose required anti-affinity selects the first is warned
// about the same node.
func TestAgentConflicts_AtAdmission(t *testing.T) {
	createNodes(t,
		framework.Node{Name: "conflict-1", Labels: map[string]string{"pool": "conflict"}, Taints: []string{"dedicated=conflict:NoSchedule"}},
		framework.Node{Name: "conflict-2", Labels: map[string]string{"pool": "conflict"}, Taints: []string{"dedicated=conflict:NoSchedule"}})
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "port-holder", "port-rival", "port-rival-pinned", "loner")
	holder := conflictAgent(t, "port-holder", "kubernetes.io/hostname: conflict-1")
	wantAllowed(t, kubectl(t, holder, "apply", "-f", "-"), "daemonset.apps/port-holder created")

	// dsguard's DaemonSet cache follows by a watch: a dry run tells when it
	// has seen the holder.
	rival := conflictAgent(t, "port-rival", "pool: conflict")
	var r framework.Result
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r = kubectl(t, rival, "apply", "--dry-run=server", "-f", "-")
		if withPrefix(warnings(r), "host-port-conflict: ") != "" || time.Now().After(deadline) {
			break
		}
	}
	r = kubectl(t, rival, "apply", "-f", "-")
	wantAllowed(t, r, "daemonset.apps/port-rival created",
		"host-port-conflict: stays Pending on 1 of 2 nodes it covers: DaemonSet monitoring/port-holder holds host port 9100/TCP on 1 node (conflict-1)")

	r = kubectl(t, conflictAgent(t, "port-rival-pinned", "kubernetes.io/hostname: conflict-1"), "apply", "-f", "-")
	wantDenied(t, r, dsWebhook, "DaemonSet monitoring/port-rival-pinned breaks 1 dsguard coverage rule",
		"[host-port-conflict] spec.template.spec: stays Pending on every node it covers (1): DaemonSet monitoring/port-holder holds host port 9100/TCP on 1 node (conflict-1); DaemonSet monitoring/port-rival holds host port 9100/TCP on 1 node (conflict-1)")

	// The rival is on conflict-2 as well: the loner meets node-exporter's
	// Pods on both nodes.
	r = kubectl(t, loner, "apply", "-f", "-")
	wantDenied(t, r, dsWebhook, "DaemonSet monitoring/loner breaks 1 dsguard coverage rule",
		"[anti-affinity-conflict] spec.template.spec.affinity.podAntiAffinity: stays Pending on every node it covers (2): ",
		"DaemonSet monitoring/port-holder repels it by anti-affinity (topologyKey kubernetes.io/hostname) on 1 node (conflict-1)",
		"DaemonSet monitoring/port-rival repels it by anti-affinity (topologyKey kubernetes.io/hostname) on 2 nodes (conflict-1, conflict-2)")
	if r := kubectl(t, "", "delete", "daemonset", "-n", "monitoring", "port-rival"); r.ExitCode != 0 {
		t.Fatalf("deleting the rival: %s", r.Stderr)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r = kubectl(t, loner, "apply", "--dry-run=server", "-f", "-")
		if r.ExitCode == 0 || time.Now().After(deadline) {
			break
		}
	}
	wantAllowed(t, kubectl(t, loner, "apply", "-f", "-"), "daemonset.apps/loner created",
		"anti-affinity-conflict: stays Pending on 1 of 2 nodes it covers: DaemonSet monitoring/port-holder repels it by anti-affinity (topologyKey kubernetes.io/hostname) on 1 node (conflict-1)")
}
