package audit

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dsguard/dsguard/test/e2e/framework"
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
	// deletes the agent's Pod. A new value for a label the node has is an
	// overwrite, refused without --overwrite, as kubectl label refuses it.
	if r := cluster.RunDsguard(t.Context(), "label", "worker-2", "kubernetes.io/os=windows"); r.ExitCode != 2 ||
		!strings.Contains(r.Stderr, `label "kubernetes.io/os" already has a value (linux) on node worker-2, and --overwrite is false`) {
		t.Errorf("an overwrite without --overwrite: exit %d, want 2 and the reason:\n%s%s", r.ExitCode, r.Stdout, r.Stderr)
	}
	out, _ = run("label", "worker-2", "gpu=true", "kubernetes.io/os=windows", "--overwrite")
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

// TestNodeChange_WarningsNameWhoLosesTheNode taints a node with kubectl, as
// a person does, and holds the Node entry's Warning lines against what the
// real controllers then do: the DaemonSets named under NoSchedule are the
// ones whose deleted Pod the DaemonSet controller does not make again there,
// and those named under NoExecute are the ones the taint eviction controller
// evicts; the others' Pods come back or stay.
func TestNodeChange_WarningsNameWhoLosesTheNode(t *testing.T) {
	const node = "worker-2"
	// Both tolerate the control-plane taint (else dsguard denies them).
	controlPlane := corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoSchedule}
	plain := daemonSet("nc-plain", controlPlane)
	scheduleOnly := daemonSet("nc-schedule-only", controlPlane, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoSchedule})
	tolerant := daemonSet("nc-tolerant", tolerateAll)
	for _, ds := range []*appsv1.DaemonSet{plain, scheduleOnly, tolerant} {
		create(t, ds)
	}
	runPods(t, plain.Name, 4)
	runPods(t, scheduleOnly.Name, 4)
	runPods(t, tolerant.Name, 4)
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		if r := cluster.Kubectl(ctx, "", "taint", "nodes", node, "dedicated-"); r.Err != nil && !strings.Contains(r.Stderr, "not found") {
			t.Errorf("cleanup: %v", r.Error())
		}
	})
	calls := func() float64 {
		return apiServerMetric(t, "apiserver_admission_webhook_request_total", `name="nodes.dsguard.io"`)
	}
	before := calls()

	// NoSchedule: the Pods stay; a deleted one comes back only where the
	// warning did not name its DaemonSet.
	named := taintNamed(t, node, "dedicated=infra:NoSchedule")
	if want := []string{"audit/nc-plain"}; !slices.Equal(named, want) {
		t.Fatalf("NoSchedule: the warnings name %v, want %v", named, want)
	}
	if got := calls() - before; got != 1 {
		t.Errorf("the API server called dsguard's Node entry %v times for one kubectl taint, want 1", got)
	}
	// The controller has seen the taint once it counts the node out of
	// nc-plain's nodes; then each agent's Pod there is deleted.
	waitStatusNudging(t, plain.Name, node, func(d *appsv1.DaemonSet) bool { return d.Status.DesiredNumberScheduled == 3 })
	for _, ds := range []*appsv1.DaemonSet{plain, scheduleOnly, tolerant} {
		deletePodOn(t, ds.Name, node)
	}
	for _, ds := range []*appsv1.DaemonSet{scheduleOnly, tolerant} {
		waitFor(t, ds.Name+"'s Pod made again on "+node, func() (bool, error) { return podOn(t, ds.Name, node) != nil, nil })
	}
	waitStatus(t, plain.Name, func(d *appsv1.DaemonSet) bool { return d.Status.CurrentNumberScheduled == 3 })
	if p := podOn(t, plain.Name, node); p != nil {
		t.Errorf("the warning said nc-plain never comes back on %s, but the controller made %s there", node, p.Name)
	}
	runPods(t, scheduleOnly.Name, 4)
	runPods(t, tolerant.Name, 4)

	// NoExecute: the taint eviction controller evicts exactly the named.
	named = taintNamed(t, node, "dedicated=infra:NoExecute")
	if want := []string{"audit/nc-schedule-only"}; !slices.Equal(named, want) {
		t.Fatalf("NoExecute: the warnings name %v, want %v", named, want)
	}
	waitFor(t, "the eviction of nc-schedule-only's Pod on "+node, func() (bool, error) {
		p := podOn(t, scheduleOnly.Name, node)
		return p == nil || p.DeletionTimestamp != nil, nil
	})
	if p := podOn(t, tolerant.Name, node); p == nil || p.DeletionTimestamp != nil {
		t.Errorf("nc-tolerant's Pod on %s was evicted or is gone, though no warning named it: %v", node, p)
	}
}

// TestNodeChange_NodesOwnWritesNeverReachDsguard makes the Node writes the
// kubelet (an annotation, a status update) and the node controllers make
// (as those identities) and an autoscaler taint's change by an admin: the
// API server's match conditions leave every one of them out, so its
// metrics count no call to dsguard's Node entry and one exclusion each.
func TestNodeChange_NodesOwnWritesNeverReachDsguard(t *testing.T) {
	const node = "worker-1"
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		// One change per kubectl call: kubectl taint stops at a taint
		// that is already gone and would leave the others.
		for _, undo := range [][]string{
			{"annotate", "nodes", node, "e2e.dsguard.io/kubelet-"},
			{"taint", "nodes", node, "e2e.dsguard.io/controller-"},
			{"taint", "nodes", node, "ToBeDeletedByClusterAutoscaler-"},
		} {
			if r := cluster.Kubectl(ctx, "", undo...); r.Err != nil && !strings.Contains(r.Stderr, "not found") {
				t.Errorf("cleanup: %v", r.Error())
			}
		}
	})
	calls := func() float64 {
		return apiServerMetric(t, "apiserver_admission_webhook_request_total", `name="nodes.dsguard.io"`)
	}
	excluded := func() float64 {
		return apiServerMetric(t, "apiserver_admission_match_condition_exclusions_total", `name="nodes.dsguard.io"`)
	}
	callsBefore, excludedBefore := calls(), excluded()
	writes := [][]string{
		// system:masters authorizes the write whatever the authorizers
		// grant these identities here; admission sees the identity.
		{"--as=system:node:" + node, "--as-group=system:nodes", "--as-group=system:masters", "annotate", "nodes", node, "e2e.dsguard.io/kubelet=1"},
		{"--as=system:node:" + node, "--as-group=system:nodes", "--as-group=system:masters", "patch", "nodes", node, "--subresource=status",
			"--type=merge", "-p", `{"metadata":{"annotations":{"e2e.dsguard.io/kubelet":"2"}}}`},
		{"--as=system:serviceaccount:kube-system:node-controller", "--as-group=system:masters", "taint", "nodes", node, "e2e.dsguard.io/controller=1:NoExecute"},
		{"--as=system:kube-controller-manager", "--as-group=system:masters", "taint", "nodes", node, "e2e.dsguard.io/controller-"},
		{"taint", "nodes", node, "ToBeDeletedByClusterAutoscaler=1733500000:NoSchedule"},
	}
	for _, w := range writes {
		r := cluster.Kubectl(t.Context(), "", w...)
		if r.Err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(w, " "), r.Error())
		}
		if strings.Contains(r.Stderr, "node-change") {
			t.Errorf("kubectl %s was judged by dsguard: %s", strings.Join(w, " "), r.Stderr)
		}
	}
	if got := calls() - callsBefore; got != 0 {
		t.Errorf("the API server called dsguard's Node entry %v times for the nodes' own writes, want 0", got)
	}
	if got := excluded() - excludedBefore; got != float64(len(writes)) {
		t.Errorf("the match conditions excluded %v of the %d writes, want all", got, len(writes))
	}
}

// TestNodeChange_OutOfServiceIsJudged: node.kubernetes.io/out-of-service
// is a taint a person (or a remediation operator) puts on a node that is
// shut down, and its NoExecute evicts every agent that does not tolerate
// it: unlike the kubelet's and the node controllers' taints of that prefix,
// the API server sends it to dsguard, which names who loses the node.
func TestNodeChange_OutOfServiceIsJudged(t *testing.T) {
	const node = "worker-1"
	controlPlane := corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoSchedule}
	plain := daemonSet("oos-plain", controlPlane)
	tolerant := daemonSet("oos-tolerant", tolerateAll)
	for _, ds := range []*appsv1.DaemonSet{plain, tolerant} {
		create(t, ds)
		runPods(t, ds.Name, 4)
	}
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		if r := cluster.Kubectl(ctx, "", "taint", "nodes", node, corev1.TaintNodeOutOfService+"-"); r.Err != nil && !strings.Contains(r.Stderr, "not found") {
			t.Errorf("cleanup: %v", r.Error())
		}
	})
	calls := func() float64 {
		return apiServerMetric(t, "apiserver_admission_webhook_request_total", `name="nodes.dsguard.io"`)
	}
	before := calls()
	named := taintNamed(t, node, corev1.TaintNodeOutOfService+"=nodeshutdown:NoExecute")
	if want := []string{"audit/oos-plain"}; !slices.Equal(named, want) {
		t.Errorf("out-of-service: the warnings name %v, want %v", named, want)
	}
	if got := calls() - before; got != 1 {
		t.Errorf("the API server called dsguard's Node entry %v times for one kubectl taint, want 1", got)
	}
}

// taintNamed runs kubectl taint as a person and returns the DaemonSets of
// this suite's namespace that dsguard's Warning lines name, sorted.
func taintNamed(t *testing.T, node, taint string) []string {
	t.Helper()
	r := cluster.Kubectl(t.Context(), "", "taint", "nodes", node, taint, "--overwrite")
	if r.Err != nil {
		t.Fatalf("kubectl taint %s %s: %v", node, taint, r.Error())
	}
	t.Logf("$ kubectl taint nodes %s %s\n%s%s", node, taint, r.Stdout, r.Stderr)
	var named []string
	for _, line := range strings.Split(r.Stderr, "\n") {
		rest, ok := strings.CutPrefix(line, "Warning: node-change: ")
		if !ok {
			continue
		}
		list, _, _ := strings.Cut(rest, ": ")
		for _, name := range strings.Split(list, ", ") {
			if strings.HasPrefix(name, "audit/") {
				named = append(named, name)
			}
		}
	}
	slices.Sort(named)
	return named
}

// podOn is the DaemonSet's Pod bound or pinned to node, nil without one.
func podOn(t *testing.T, name, node string) *corev1.Pod {
	t.Helper()
	for _, p := range podsOf(t, name) {
		if targetNode(&p) == node {
			return &p
		}
	}
	return nil
}

// deletePodOn deletes the DaemonSet's Pod on node at once, as a finished
// kubelet would confirm it.
func deletePodOn(t *testing.T, name, node string) {
	t.Helper()
	p := podOn(t, name, node)
	if p == nil {
		t.Fatalf("%s has no Pod on %s", name, node)
	}
	if err := kube.CoreV1().Pods("audit").Delete(t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p.Name+" gone", func() (bool, error) {
		_, err := kube.CoreV1().Pods("audit").Get(t.Context(), p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// apiServerMetric sums the API server's own metric over the samples whose
// labels hold every one of labels; 0 before the first sample.
func apiServerMetric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	body, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("the API server's metrics: %v", err)
	}
	v, err := framework.SumMetric(body, name, labels...)
	if err != nil && strings.Contains(err.Error(), "not served") {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}
