package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestLiveCoverage_WarningNamesSkippedNode: under a policy where the
// control-plane rule only warns, its warning names the taint and cp-1, the
// node the taint keeps the DaemonSet off (node-coverage does not repeat it).
func TestLiveCoverage_WarningNamesSkippedNode(t *testing.T) {
	setPolicy(t, cpWarnPolicy, allowedWithWarning)
	defer setPolicy(t, defaultPol, deniedByDsguard)
	r := kubectl(t, renamed(t, "node-exporter.yaml", "node-exporter", "ne-live"), "apply", "-f", "-")
	wantAllowed(t, r, "daemonset.apps/ne-live created",
		cpWarning+": skips cp-1 (1 of 4 nodes), unseen in desiredNumberScheduled")
}

// TestLiveCoverage_NewTaintedNodeRaisesEvent: a node that joins with a taint
// an existing DaemonSet does not tolerate produces a Warning Event on that
// DaemonSet within seconds.
func TestLiveCoverage_NewTaintedNodeRaisesEvent(t *testing.T) {
	ds := renamed(t, "node-exporter.yaml", "node-exporter", "cp-tolerating")
	ds = strings.Replace(ds, "      hostNetwork: true\n",
		"      hostNetwork: true\n      tolerations:\n        - {key: node-role.kubernetes.io/control-plane, operator: Exists}\n", 1)
	wantAllowed(t, kubectl(t, ds, "apply", "-f", "-"), "daemonset.apps/cp-tolerating created")
	// Let the leader's watcher see the DaemonSet covering every node first.
	time.Sleep(time.Second)

	start := time.Now()
	if err := cluster.CreateNodes(t.Context(), []framework.Node{
		{Name: "infra-1", Labels: map[string]string{"pool": "infra"}, Taints: []string{"dedicated=infra:NoSchedule"}},
	}); err != nil {
		t.Fatal(err)
	}
	var events string
	for time.Since(start) < 5*time.Second {
		r := cluster.Kubectl(t.Context(), "", "get", "events", "-n", "monitoring",
			"--field-selector", "involvedObject.name=cp-tolerating,reason=CoverageReduced",
			"-o", "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message", "--no-headers")
		if events = r.Stdout; strings.Contains(events, "infra-1") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("Event after %s: %s", took.Round(time.Millisecond), events)
	if !strings.Contains(events, "Warning") || !strings.Contains(events, "newly skipped: infra-1 (taint dedicated=infra:NoSchedule not tolerated)") {
		t.Fatalf("no CoverageReduced Event naming infra-1 within 5s; events:\n%s\ndsguard log:\n%s", events, cluster.DsguardLog())
	}
}
