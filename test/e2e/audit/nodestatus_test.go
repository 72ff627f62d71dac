package audit

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestNodeChange_StatusAndKubeletRelabelsAreJudged: a label change through
// nodes/status (which the API server stores) and a kubelet's relabel of its
// own node (as system:node:<name>, group system:nodes) each reach dsguard's
// Node entry once and are answered with a warning naming the DaemonSet that
// loses the node; the kubelet's write is admitted.
func TestNodeChange_StatusAndKubeletRelabelsAreJudged(t *testing.T) {
	const node = "worker-1"
	agent := daemonSet("relabel-agent", corev1.Toleration{Key: "node-role.kubernetes.io/control-plane",
		Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	agent.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	create(t, agent)
	runPods(t, agent.Name, 4)
	restore := func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		if r := cluster.Kubectl(ctx, "", "label", "nodes", node, "kubernetes.io/os=linux", "--overwrite"); r.Err != nil {
			t.Errorf("restoring %s's label: %v", node, r.Error())
		}
	}
	t.Cleanup(restore)
	calls := func() float64 {
		return apiServerMetric(t, "apiserver_admission_webhook_request_total", `name="nodes.dsguard.io"`)
	}
	for _, as := range [][]string{
		nil, // a person, through nodes/status
		{"--as=system:node:" + node, "--as-group=system:nodes", "--as-group=system:masters"}, // the kubelet
	} {
		before := calls()
		args := append(slices.Clone(as), "patch", "nodes", node, "--subresource=status", "--type=merge",
			"-p", `{"metadata":{"labels":{"kubernetes.io/os":"windows"}}}`)
		r := cluster.Kubectl(t.Context(), "", args...)
		t.Logf("$ kubectl %s\n%s%s", strings.Join(args, " "), r.Stdout, r.Stderr)
		if r.Err != nil {
			t.Fatalf("the relabel was refused: %v", r.Error())
		}
		if !strings.Contains(r.Stderr, "Warning: node-change: audit/relabel-agent: operating system or architecture not selected") {
			t.Errorf("kubectl %s: no warning naming audit/relabel-agent", strings.Join(args, " "))
		}
		if got := calls() - before; got != 1 {
			t.Errorf("kubectl %s: the API server called the Node entry %v times, want 1", strings.Join(args, " "), got)
		}
		restore()
	}
}
