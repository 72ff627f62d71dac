package audit

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTaintAndLabel_SayWhatAChangeDoes runs dsguard taint and dsguard label
// against the cluster: each names the DaemonSets a node change would alter
// and what the controller will do to them, and changes nothing.
func TestTaintAndLabel_SayWhatAChangeDoes(t *testing.T) {
	// Tolerates the control-plane taint only; Linux nodes.
	agent := daemonSet("taint-agent", corev1.Toleration{Key: "node-role.kubernetes.io/control-plane",
		Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	agent.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	create(t, agent)
	runPods(t, "taint-agent", 4)
	gpu := daemonSet("taint-gpu-agent", tolerateAll)
	gpu.Spec.Template.Spec.NodeSelector = map[string]string{"gpu": "true"}
	create(t, gpu)
	create(t, daemonSet("taint-tolerant", tolerateAll))
	waitStatus(t, "taint-tolerant", func(d *appsv1.DaemonSet) bool { return d.Status.DesiredNumberScheduled == 4 })
	before, err := kube.CoreV1().Nodes().Get(t.Context(), "worker-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		t.Helper()
		r := cluster.RunDsguard(t.Context(), args...)
		t.Logf("$ dsguard %s\n%s%s(exit %d)", strings.Join(args, " "), r.Stdout, r.Stderr, r.ExitCode)
		return r.Stdout, r.ExitCode
	}

	out, code := run("taint", "worker-2", "dedicated=infra:NoSchedule")
	if code != 0 {
		t.Errorf("exit %d without --exit-code", code)
	}
	wantOutput(t, out, "taints on node worker-2: dedicated=infra:NoSchedule (nothing was changed)",
		"audit/taint-agent taint dedicated=infra:NoSchedule not tolerated: its Pod keeps running until it is restarted, evicted or updated, then never comes back on worker-2")
	if strings.Contains(out, "taint-tolerant") {
		t.Errorf("a DaemonSet that tolerates everything is listed:\n%s", out)
	}

	out, code = run("taint", "worker-2", "dedicated=infra:NoExecute", "-o", "json", "--exit-code")
	if code != 1 {
		t.Errorf("--exit-code with a DaemonSet losing the node: exit %d, want 1", code)
	}
	var report struct {
		DaemonSets []struct{ Namespace, Name, Impact, Why string } `json:"daemonSets"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	if !slices.ContainsFunc(report.DaemonSets, func(d struct{ Namespace, Name, Impact, Why string }) bool {
		return d.Name == "taint-agent" && d.Impact == "removed" && strings.HasSuffix(d.Why, "its Pod on worker-2 is evicted now")
	}) {
		t.Errorf("NoExecute: taint-agent not reported as evicted now: %+v", report.DaemonSets)
	}

	// Labels: one the GPU agent selects gains it the node; another OS
	// deletes the agent's Pod.
	out, _ = run("label", "worker-2", "gpu=true", "kubernetes.io/os=windows")
	wantOutput(t, out, "labels on node worker-2: gpu=true kubernetes.io/os=windows (nothing was changed)",
		"audit/taint-gpu-agent the node now qualifies: the controller makes a Pod on worker-2",
		"audit/taint-agent operating system or architecture not selected: its Pod on worker-2 is deleted now")

	after, err := kube.CoreV1().Nodes().Get(t.Context(), "worker-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("worker-2 changed (resourceVersion %s, then %s): dsguard taint and label must change nothing",
			before.ResourceVersion, after.ResourceVersion)
	}
}
