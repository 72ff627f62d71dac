package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestLiveCoverage_WarningNamesSkippedNode: under a policy where the
// control-plane rule only warns, its warning names the taint and cp-1, the
// node the taint keeps the DaemonSet off (node-coverage does not repeat it).
func TestLiveCoverage_WarningNamesSkippedNode(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "ne-live")
	setPolicy(t, cpWarnPolicy, allowedWithWarning)
	r := kubectl(t, renamed(t, "node-exporter.yaml", "node-exporter", "ne-live"), "apply", "-f", "-")
	wantAllowed(t, r, "daemonset.apps/ne-live created",
		cpWarning+": skips cp-1 (1 of 4 nodes), unseen in desiredNumberScheduled")
}

// TestLiveCoverage_NewTaintedNodeRaisesEvent: a node that joins with a taint
// an existing DaemonSet does not tolerate produces a Warning Event on that
// DaemonSet within seconds.
func TestLiveCoverage_NewTaintedNodeRaisesEvent(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "cp-tolerating")
	ds := renamed(t, "node-exporter.yaml", "node-exporter", "cp-tolerating")
	ds = strings.Replace(ds, "      hostNetwork: true\n",
		"      hostNetwork: true\n      tolerations:\n        - {key: node-role.kubernetes.io/control-plane, operator: Exists}\n", 1)
	// An image on :latest draws a warning at admission and, once the
	// auditor has judged the DaemonSet on today's nodes, a PolicyViolation
	// Event: the sign that a node joining now is a change it will see.
	ds = strings.Replace(ds, "node-exporter:v1.9.1", "node-exporter:latest", 1)
	wantAllowed(t, kubectl(t, ds, "apply", "-f", "-"), "daemonset.apps/cp-tolerating created", "image-pinned: ")
	if events := eventsOf(t, "cp-tolerating", "PolicyViolation", "image-pinned", 30*time.Second); events == "" {
		t.Fatalf("the auditor never judged cp-tolerating; dsguard log:\n%s", cluster.DsguardLog())
	}

	start := time.Now()
	createNodes(t, framework.Node{Name: "infra-1", Labels: map[string]string{"pool": "infra"}, Taints: []string{"dedicated=infra:NoSchedule"}})
	events := eventsOf(t, "cp-tolerating", "CoverageReduced", "infra-1", 5*time.Second)
	took := time.Since(start)
	t.Logf("Event after %s: %s", took.Round(time.Millisecond), events)
	if !strings.Contains(events, "Warning") || !strings.Contains(events, "newly skipped: infra-1 (taint dedicated=infra:NoSchedule not tolerated)") {
		t.Fatalf("no CoverageReduced Event naming infra-1 within 5s; events:\n%s\ndsguard log:\n%s", events, cluster.DsguardLog())
	}
}

// TestLiveCoverage_RepeatedEventsFoldIntoSeries: a taint that comes back
// repeats the DaemonSet's CoverageReduced Event, which the API server then
// counts on the first one (a series), as client-go's recorders fold repeats,
// instead of storing an Event per flap.
func TestLiveCoverage_RepeatedEventsFoldIntoSeries(t *testing.T) {
	createNodes(t, framework.Node{Name: "flap-1", Labels: map[string]string{"pool": "flap"}})
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "flap-watcher")
	ds := renamed(t, "node-exporter.yaml", "node-exporter", "flap-watcher")
	ds = strings.Replace(ds, "      hostNetwork: true\n",
		"      hostNetwork: true\n      tolerations:\n        - {key: node-role.kubernetes.io/control-plane, operator: Exists}\n", 1)
	ds = strings.Replace(ds, "node-exporter:v1.9.1", "node-exporter:latest", 1)
	wantAllowed(t, kubectl(t, ds, "apply", "-f", "-"), "daemonset.apps/flap-watcher created", "image-pinned: ")
	if events := eventsOf(t, "flap-watcher", "PolicyViolation", "image-pinned", 30*time.Second); events == "" {
		t.Fatalf("the auditor never judged flap-watcher; dsguard log:\n%s", cluster.DsguardLog())
	}
	taint := func(arg string) {
		t.Helper()
		if r := kubectl(t, "", "taint", "nodes", "flap-1", arg); r.Err != nil || r.ExitCode != 0 {
			t.Fatalf("kubectl taint %s: exit %d, %v", arg, r.ExitCode, r.Err)
		}
	}
	taint("flap=yes:NoSchedule")
	if eventsOf(t, "flap-watcher", "CoverageReduced", "flap-1", 10*time.Second) == "" {
		t.Fatalf("no CoverageReduced Event naming flap-1; dsguard log:\n%s", cluster.DsguardLog())
	}
	taint("flap=yes:NoSchedule-")
	// The auditor must see flap-1 covered again before the taint returns,
	// else the taint's return is no change to it. No Event says so; its
	// gauge of the nodes a taint keeps the DaemonSet off does.
	var last string
	took := framework.Eventually(t, 10*time.Second, 100*time.Millisecond, func() bool {
		n, err := uncoveredNodes(t, "flap-watcher", "taint")
		last = fmt.Sprint(n, " ", err)
		return err == nil && n == 0
	}, func() string {
		return "the auditor's dsguard_daemonset_uncovered_nodes{daemonset=\"flap-watcher\",reason=\"taint\"} after the taint was lifted: " +
			last + ", want 0; dsguard log:\n" + cluster.DsguardLog()
	})
	t.Logf("the auditor saw flap-1 covered again %s after the taint was lifted", took.Round(time.Millisecond))
	taint("flap=yes:NoSchedule")
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := cluster.Kubectl(t.Context(), "", "get", "events", "-n", "monitoring",
			"--field-selector", "involvedObject.name=flap-watcher,reason=CoverageReduced",
			"-o", "custom-columns=COUNT:.series.count", "--no-headers")
		if counts := strings.Fields(r.Stdout); len(counts) == 1 && counts[0] == "2" {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("CoverageReduced Events' counts %q, want one Event counted twice; dsguard log:\n%s", counts, cluster.DsguardLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createNodes creates nodes for one test and deletes them when it ends, so
// that the node counts other tests' verdicts name ("1 of 4 nodes") are the
// suite's own.
func createNodes(t *testing.T, nodes ...framework.Node) {
	t.Helper()
	t.Cleanup(func() { deleteNodes(t, nodes) })
	if err := cluster.CreateNodes(t.Context(), nodes); err != nil {
		t.Fatal(err)
	}
}

// deleteNodes deletes nodes and waits until dsguard no longer counts them: a
// DaemonSet pinned to each by hostname runs on no node today.
func deleteNodes(t *testing.T, nodes []framework.Node) {
	ctx, cancel := framework.CleanupContext(t, time.Minute)
	defer cancel()
	args := []string{"delete", "node", "--ignore-not-found"}
	for _, n := range nodes {
		args = append(args, n.Name)
	}
	if r := cluster.Kubectl(ctx, "", args...); r.Err != nil {
		t.Errorf("cleanup: %v", r.Error())
		return
	}
	for _, n := range nodes {
		probe := manifest(t, "node-exporter-tolerations.yaml", "\n  name: node-exporter\n", "\n  name: node-gone-probe\n",
			"      hostNetwork: true\n", "      hostNetwork: true\n      nodeSelector:\n        kubernetes.io/hostname: "+n.Name+"\n")
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := cluster.Kubectl(ctx, probe, "apply", "--dry-run=server", "-f", "-")
			if r.ExitCode == 0 && strings.Contains(r.Stderr, "node-coverage: runs on no node today") {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("cleanup: dsguard still counts node %s 30s after its deletion; a DaemonSet pinned to it (exit %d):\n%s",
					n.Name, r.ExitCode, r.Stderr)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// uncoveredNodes reads the auditor's dsguard_daemonset_uncovered_nodes of a
// DaemonSet in namespace monitoring for one reason.
func uncoveredNodes(t *testing.T, name, reason string) (float64, error) {
	return framework.ScrapeMetric(t.Context(), metricsURL, "dsguard_daemonset_uncovered_nodes",
		`namespace="monitoring"`, `daemonset="`+name+`"`, `reason="`+reason+`"`)
}

// eventsOf polls the Events of one DaemonSet in namespace monitoring with the
// given reason until one mentions want, for at most limit; it returns them as
// "TYPE REASON MESSAGE" lines, or "" when none came.
func eventsOf(t *testing.T, name, reason, want string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r := cluster.Kubectl(t.Context(), "", "get", "events", "-n", "monitoring",
			"--field-selector", "involvedObject.name="+name+",reason="+reason,
			"-o", "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message", "--no-headers")
		if strings.Contains(r.Stdout, want) {
			return r.Stdout
		}
		if time.Now().After(deadline) {
			return ""
		}
		time.Sleep(100 * time.Millisecond)
	}
}
