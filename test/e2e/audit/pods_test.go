package audit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/test/e2e/framework"
)

// daemonSet is a compliant agent; tolerations decide where it runs.
func daemonSet(name string, tolerations ...corev1.Toleration) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "audit"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: tolerations,
					Containers: []corev1.Container{{Name: "agent", Image: "example/agent:v1",
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}}}},
				},
			},
		},
	}
}

var tolerateAll = corev1.Toleration{Operator: corev1.TolerationOpExists}

// create creates a DaemonSet for one test, which deletes it, with its Pods,
// when it ends.
func create(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	t.Cleanup(func() { remove(t, ds.Name) })
	if _, err := kube.AppsV1().DaemonSets(ds.Namespace).Create(t.Context(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// remove deletes a DaemonSet and its Pods. The Pods go at once: with no
// kubelet to confirm their end, a Pod bound to a node would stay Terminating.
func remove(t *testing.T, name string) {
	ctx, cancel := framework.CleanupContext(t, time.Minute)
	defer cancel()
	if err := kube.AppsV1().DaemonSets("audit").Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: deleting DaemonSet %s: %v", name, err)
	}
	if err := kube.CoreV1().Pods("audit").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "app=" + name}); err != nil {
		t.Errorf("cleanup: deleting the Pods of %s: %v", name, err)
	}
}

// waitFor polls cond every 100ms for up to 30s.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	waitWithin(t, 30*time.Second, what, cond)
}

// waitWithin polls cond every 100ms for up to bound.
func waitWithin(t *testing.T, bound time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			ev := cluster.Kubectl(t.Context(), "", "get", "events", "-n", "audit")
			ds := cluster.Kubectl(t.Context(), "", "get", "ds,pods", "-n", "audit", "-o", "wide")
			kcm := cluster.ControllerManagerLog()
			if len(kcm) > 6000 {
				kcm = kcm[len(kcm)-6000:]
			}
			t.Fatalf("timed out waiting for %s\nevents:\n%s\nobjects:\n%s\nkube-controller-manager log (tail):\n%s", what, ev.Stdout, ds.Stdout, kcm)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func podsOf(t *testing.T, name string) []corev1.Pod {
	t.Helper()
	pods, err := kube.CoreV1().Pods("audit").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// targetNode is where the controller wants the Pod (its matchFields pin).
func targetNode(p *corev1.Pod) string { return coverage.DaemonPodNode(p) }

// runPods does what the scheduler and the kubelet would: it binds every
// Pod of the DaemonSet to its node and reports it running, ready unless its
// node is in unready (then its readiness probe fails). It waits for want Pods.
func runPods(t *testing.T, name string, want int, unready ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d Pods of %s", want, name), func() (bool, error) {
		return len(podsOf(t, name)) >= want, nil
	})
	for _, p := range podsOf(t, name) {
		if p.DeletionTimestamp != nil {
			continue
		}
		node := targetNode(&p)
		if err := bind(t, &p); err != nil {
			t.Fatalf("binding %s to %s: %v", p.Name, node, err)
		}
		ready := !contains(unready, node)
		setPodStatus(t, p.Name, ready)
	}
}

// bind binds an unbound daemon Pod to the node the controller pinned it to,
// as the scheduler would.
func bind(t *testing.T, p *corev1.Pod) error {
	if p.Spec.NodeName != "" {
		return nil
	}
	return kube.CoreV1().Pods("audit").Bind(t.Context(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: "audit"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: targetNode(p)},
	}, metav1.CreateOptions{})
}

func setPodStatus(t *testing.T, pod string, ready bool) {
	t.Helper()
	p, err := kube.CoreV1().Pods("audit").Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setRunning(p, ready)
	if _, err := kube.CoreV1().Pods("audit").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of %s: %v", pod, err)
	}
}

// markReady reports p running and ready, as its kubelet would.
func markReady(p *corev1.Pod) { setRunning(p, true) }

// setRunning sets the status a kubelet reports for a running Pod whose
// readiness probe passes (ready) or fails.
func setRunning(p *corev1.Pod, ready bool) {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	now := metav1.NewTime(time.Now().Add(-time.Minute))
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", Ready: ready, Image: "example/agent:v1",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// waitStatus waits until the controller's status of ds satisfies cond.
func waitStatus(t *testing.T, name string, cond func(*appsv1.DaemonSet) bool) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	waitFor(t, "status of "+name, func() (bool, error) {
		var err error
		ds, err = kube.AppsV1().DaemonSets("audit").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ds.Status.ObservedGeneration >= ds.Generation && cond(ds), nil
	})
	return ds
}

// waitStatusNudging is waitStatus while reporting the status of the
// DaemonSet's Pod on node every half second, as its kubelet would: the 1.37
// controller does not resync a DaemonSet for a taint that lets its Pod stay
// and recounts only at that Pod's next status report.
func waitStatusNudging(t *testing.T, name, node string, cond func(*appsv1.DaemonSet) bool) *appsv1.DaemonSet {
	t.Helper()
	lastReport := time.Time{}
	return waitStatus(t, name, func(ds *appsv1.DaemonSet) bool {
		if cond(ds) {
			return true
		}
		if time.Since(lastReport) > 500*time.Millisecond {
			for _, p := range podsOf(t, name) {
				if targetNode(&p) == node && p.DeletionTimestamp == nil {
					setPodStatus(t, p.Name, true)
				}
			}
			lastReport = time.Now()
		}
		return false
	})
}

// audit runs `dsguard audit` and logs its output for the transcript.
func audit(t *testing.T, args ...string) framework.Result {
	t.Helper()
	r := cluster.RunDsguard(t.Context(), append([]string{"audit"}, args...)...)
	t.Logf("$ dsguard %s\n%s%s(exit %d)", strings.Join(append([]string{"audit"}, args...), " "), r.Stdout, r.Stderr, r.ExitCode)
	return r
}

// waitEvent waits until the DaemonSet has an Event with this reason whose
// message contains fragment, and returns the message.
func waitEvent(t *testing.T, name, reason, fragment string) string {
	t.Helper()
	var msg string
	waitFor(t, fmt.Sprintf("%s Event on %s", reason, name), func() (bool, error) {
		evs, err := kube.CoreV1().Events("audit").List(t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, fragment) {
				msg = e.Type + " " + e.Reason + ": " + e.Message
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("Event: %s", msg)
	return msg
}
