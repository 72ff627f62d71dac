package audit

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

func wantOutput(t *testing.T, out string, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if !strings.Contains(out, f) {
			t.Errorf("output lacks %q:\n%s", f, out)
		}
	}
}

// Each scenario creates its own DaemonSets and deletes them when it ends, and
// Misscheduled lifts the taint it puts on worker-3, so that they pass in any
// order and alone.

// createThroughAGap creates a DaemonSet that tolerates everything, with 4
// Pods of which the one on worker-1 starts unready: the auditor reports the
// gap, then the Pod becomes ready. So the auditor sees the DaemonSet reach
// Healthy (and says so) rather than find it healthy already.
func createThroughAGap(t *testing.T, name string) {
	t.Helper()
	create(t, daemonSet(name, tolerateAll))
	runPods(t, name, 4, "worker-1")
	waitEvent(t, name, "CoverageGap", "nodes without a ready Pod")
	for _, p := range podsOf(t, name) {
		if targetNode(&p) == "worker-1" {
			setPodStatus(t, p.Name, true)
		}
	}
}

func TestAudit_Healthy(t *testing.T) {
	createThroughAGap(t, "steady")
	waitStatus(t, "steady", func(ds *appsv1.DaemonSet) bool { return ds.Status.NumberReady == 4 && ds.Status.NumberAvailable == 4 })
	r := audit(t, "-n", "audit", "steady", "--exit-code")
	if r.ExitCode != 0 {
		t.Errorf("--exit-code on a healthy DaemonSet: exit %d", r.ExitCode)
	}
	wantOutput(t, r.Stdout, "audit       steady   4         4         4       4            4           0              0         -        Healthy   4 of 4 nodes covered")
	waitEvent(t, "steady", "CoverageRestored", "4 of 4 nodes covered")
}

func TestAudit_CoverageGapTurnsPersistent(t *testing.T) {
	create(t, daemonSet("gappy", tolerateAll))
	runPods(t, "gappy", 4, "worker-2")
	waitStatus(t, "gappy", func(ds *appsv1.DaemonSet) bool {
		return ds.Status.NumberReady == 3 && ds.Status.CurrentNumberScheduled == 4
	})

	r := audit(t, "-n", "audit", "gappy", "-o", "wide", "--exit-code")
	if r.ExitCode != 1 {
		t.Errorf("--exit-code with a gap: exit %d, want 1", r.ExitCode)
	}
	wantOutput(t, r.Stdout, "CoverageGap", "1 of 4 nodes without a ready Pod",
		"audit/gappy:\n", "  node worker-2: pod gappy-", "NotReady: readiness failing for container agent")

	// The auditor in dsguard serve saw it first as a gap, then, after the
	// window, as a persistent one, and investigated node by node.
	// The first audit may catch the Pods before any is ready; any gap will do.
	waitEvent(t, "gappy", "CoverageGap", "nodes without a ready Pod")
	start := time.Now()
	msg := waitEvent(t, "gappy", "PersistentGap", "worker-2: NotReady readiness failing for container agent")
	t.Logf("PersistentGap Event %s after the CoverageGap one (window %s)", time.Since(start).Round(100*time.Millisecond), gapWindow)
	wantOutput(t, msg, "Warning PersistentGap: 1 of 4 nodes without a ready Pod for ")

	// Readiness recovers: the auditor says so.
	for _, p := range podsOf(t, "gappy") {
		if targetNode(&p) == "worker-2" {
			setPodStatus(t, p.Name, true)
		}
	}
	waitEvent(t, "gappy", "CoverageRestored", "4 of 4 nodes covered")
}

func TestAudit_RollingOut(t *testing.T) {
	// A rollout is a change of state the auditor reports only for a
	// DaemonSet it has judged before: it sees this one healthy first (a
	// gap on worker-1, then restored, as in TestAudit_Healthy).
	createThroughAGap(t, "rolling")
	waitEvent(t, "rolling", "CoverageRestored", "4 of 4 nodes covered")

	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"example/agent:v2"}]}}}}`)
	if _, err := kube.AppsV1().DaemonSets("audit").Patch(t.Context(), "rolling", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, "rolling", func(ds *appsv1.DaemonSet) bool {
		return ds.Status.UpdatedNumberScheduled < ds.Status.DesiredNumberScheduled
	})
	r := audit(t, "-n", "audit", "rolling")
	wantOutput(t, r.Stdout, "RollingOut", "of 4 Pods updated")
	waitEvent(t, "rolling", "RollingOut", "of 4 Pods updated")
}

func TestAudit_Misscheduled(t *testing.T) {
	cp := corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}
	create(t, daemonSet("picky", cp))
	runPods(t, "picky", 4)
	waitStatus(t, "picky", func(ds *appsv1.DaemonSet) bool { return ds.Status.NumberReady == 4 })

	// A NoSchedule taint after the Pod exists: the node no longer qualifies,
	// but the controller keeps the running Pod and counts it misscheduled.
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		if r := cluster.Kubectl(ctx, "", "taint", "nodes", "worker-3", "dedicated=storage:NoSchedule-"); r.Err != nil &&
			!strings.Contains(r.Stderr, "not found") {
			t.Errorf("cleanup: %v", r.Error())
		}
	})
	if r := cluster.Kubectl(t.Context(), "", "taint", "nodes", "worker-3", "dedicated=storage:NoSchedule"); r.Err != nil {
		t.Fatal(r.Error())
	}
	waitStatusNudging(t, "picky", "worker-3", func(ds *appsv1.DaemonSet) bool { return ds.Status.NumberMisscheduled == 1 })
	r := audit(t, "-A", "-o", "wide", "--exit-code")
	if r.ExitCode != 1 {
		t.Errorf("--exit-code with a misscheduled Pod: exit %d, want 1", r.ExitCode)
	}
	wantOutput(t, r.Stdout, "picky", "Misscheduled", "1 Pods run on nodes that no longer qualify",
		"audit/picky:\n  skips taint dedicated=storage:NoSchedule not tolerated (worker-3)")
	waitEvent(t, "picky", "Misscheduled", "1 Pods run on nodes that no longer qualify")
	waitEvent(t, "picky", "CoverageReduced", "newly skipped: worker-3 (taint dedicated=storage:NoSchedule not tolerated)")
}
