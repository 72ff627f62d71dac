package audit

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestRollout_UpdateSaysWhatItWillDo: at an UPDATE, kubectl's Warning lines
// say whether the change starts a rollout and how many nodes go without the
// agent at once; then the real DaemonSet controller does exactly that, while
// the test plays the kubelet (binds the new Pods, reports them ready,
// confirms the old ones' deletion).
func TestRollout_UpdateSaysWhatItWillDo(t *testing.T) {
	const name, nodes, window = "rollout-agent", 4, 2
	ds := daemonSet(name, tolerateAll)
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(window))
	create(t, ds)
	runPods(t, name, nodes)
	waitStatus(t, name, func(d *appsv1.DaemonSet) bool {
		return d.Status.CurrentNumberScheduled == nodes && d.Status.NumberAvailable == nodes
	})

	// A label on the DaemonSet leaves the template alone: no rollout is
	// announced, and the controller makes no new revision and deletes
	// nothing (watched for 3 s: nothing happening has no event to wait for).
	r := cluster.Kubectl(t.Context(), "", "label", "daemonset", "-n", "audit", name, "team=observability")
	t.Logf("$ %s\n%s%s", r.Command, r.Stdout, r.Stderr)
	if r.ExitCode != 0 || strings.Contains(r.Stderr, "rollout-impact") {
		t.Fatalf("a label change: exit %d, and no rollout-impact warning expected:\n%s", r.ExitCode, r.Stderr)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if n := revisions(t, name); n != 1 {
			t.Fatalf("a label change made the controller write %d revisions, want 1", n)
		}
		if down := nodesWithoutAgent(podsOf(t, name), nodes); down != 0 {
			t.Fatalf("a label change took the agent off %d nodes", down)
		}
	}

	r = cluster.Kubectl(t.Context(), "", "set", "image", "daemonset/"+name, "-n", "audit", "agent=example/agent:v2")
	t.Logf("$ %s\n%s%s", r.Command, r.Stdout, r.Stderr)
	want := "Warning: rollout-impact: this template change restarts the agent on 4 nodes, 2 at a time " +
		"(maxUnavailable 2 of 4 nodes, by the live nodes)"
	if r.ExitCode != 0 || !strings.Contains(r.Stderr, want) {
		t.Fatalf("kubectl set image: exit %d; want the warning %q in:\n%s", r.ExitCode, want, r.Stderr)
	}

	most, rounds := followRollout(t, name, nodes, nodesWithoutAgent)
	t.Logf("rollout over %d rounds; at most %d nodes without an available agent at once", rounds, most)
	if most != window {
		t.Errorf("the controller took up to %d nodes at once; the warning said %d", most, window)
	}
	if n := revisions(t, name); n != 2 {
		t.Errorf("%d revisions after the image change, want 2", n)
	}
}

// revisions counts the controller's revisions of the DaemonSet.
func revisions(t *testing.T, name string) int {
	t.Helper()
	list, err := kube.AppsV1().ControllerRevisions("audit").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// followRollout follows a rollout to its end, playing the kubelet: each
// round waits until measure of the Pods holds still, notes it, then
// confirms the deletions and makes the new Pods ready. It returns measure's
// largest value and the number of rounds.
func followRollout(t *testing.T, name string, nodes int, measure func(pods []corev1.Pod, nodes int) int) (most, rounds int) {
	t.Helper()
	// A round takes a second of holding still and the controller's turn:
	// 20 rounds of one node fit in three minutes.
	waitWithin(t, 3*time.Minute, "the rollout of "+name+" to finish", func() (bool, error) {
		if updatedAndAvailable(podsOf(t, name)) == nodes {
			return true, nil
		}
		most = max(most, steady(t, name, nodes, measure))
		rounds++
		starting := false
		for _, p := range podsOf(t, name) {
			if p.DeletionTimestamp == nil {
				starting = starting || !podReady(&p)
				continue
			}
			// The kubelet confirms a deletion once the container ended.
			if err := kube.CoreV1().Pods("audit").Delete(t.Context(), p.Name,
				metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Logf("confirming the deletion of %s: %v", p.Name, err)
			}
		}
		if starting {
			startPods(t, name, "")
		}
		return false, nil
	})
	return most, rounds
}

// nodesWithoutAgent counts the nodes where no Pod of the DaemonSet is
// available: none there, or only one being deleted or not ready.
func nodesWithoutAgent(pods []corev1.Pod, nodes int) int {
	up := map[string]bool{}
	for i := range pods {
		if p := &pods[i]; p.DeletionTimestamp == nil && podReady(p) {
			up[targetNode(p)] = true
		}
	}
	return nodes - len(up)
}

// nodesSurging counts the nodes where a new Pod not yet available runs
// beside the old one (a maxSurge rollout's window).
func nodesSurging(pods []corev1.Pod, _ int) int {
	old, starting := map[string]bool{}, map[string]bool{}
	for i := range pods {
		p := &pods[i]
		switch {
		case p.DeletionTimestamp != nil:
		case p.Spec.Containers[0].Image != "example/agent:v2":
			old[targetNode(p)] = true
		case !podReady(p):
			starting[targetNode(p)] = true
		}
	}
	n := 0
	for node := range starting {
		if old[node] {
			n++
		}
	}
	return n
}

// steady waits until measure gives the same count for a whole second (the
// controller acts on a window's Pods in one sync, but the test could look
// between two of its writes).
func steady(t *testing.T, name string, nodes int, measure func([]corev1.Pod, int) int) int {
	t.Helper()
	last, since := -1, time.Now()
	for {
		n := measure(podsOf(t, name), nodes)
		if n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) >= time.Second {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func updatedAndAvailable(pods []corev1.Pod) int {
	n := 0
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && podReady(p) && p.Spec.Containers[0].Image == "example/agent:v2" {
			n++
		}
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestRollout_WindowOnTwentyNodes: on 20 nodes, an image change with
// maxUnavailable 1, 10 % and 25 %, and with maxSurge 25 %, warns how many
// nodes the rollout takes at a time, and the real controller's largest
// window (nodes without an available agent, or nodes with a new Pod
// starting beside the old) is exactly that.
func TestRollout_WindowOnTwentyNodes(t *testing.T) {
	nodes := rolloutFleet(t)
	cases := []struct {
		name        string
		unavailable intstr.IntOrString
		surge       *intstr.IntOrString
		window      int
		measure     func([]corev1.Pod, int) int
	}{
		{"maxUnavailable 1", intstr.FromInt32(1), nil, 1, nodesWithoutAgent},
		{"maxUnavailable 10%", intstr.FromString("10%"), nil, 2, nodesWithoutAgent},
		{"maxUnavailable 25%", intstr.FromString("25%"), nil, 5, nodesWithoutAgent},
		{"maxSurge 25%", intstr.FromInt32(0), ptr.To(intstr.FromString("25%")), 5, nodesSurging},
	}
	atATime := regexp.MustCompile(`Warning: rollout-impact: this template change \S+ the agent on 20 nodes, [^:]*?(\d+) at a time`)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("fleet-agent-%d", i)
			create(t, fleetAgent(name, &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &tc.unavailable, MaxSurge: tc.surge}))
			runPods(t, name, nodes)
			waitStatus(t, name, func(d *appsv1.DaemonSet) bool { return d.Status.NumberAvailable == int32(nodes) })

			r := cluster.Kubectl(t.Context(), "", "set", "image", "daemonset/"+name, "-n", "audit", "agent=example/agent:v2")
			t.Logf("$ %s\n%s%s", r.Command, r.Stdout, r.Stderr)
			m := atATime.FindStringSubmatch(r.Stderr)
			if r.ExitCode != 0 || m == nil {
				t.Fatalf("kubectl set image: exit %d; no rollout-impact window in:\n%s", r.ExitCode, r.Stderr)
			}
			if m[1] != strconv.Itoa(tc.window) {
				t.Errorf("the warning says %s at a time, want %d (resolved as the controller does)", m[1], tc.window)
			}
			most, rounds := followRollout(t, name, nodes, tc.measure)
			t.Logf("rollout over %d rounds; the widest window was %d nodes", rounds, most)
			if strconv.Itoa(most) != m[1] {
				t.Errorf("the controller's widest window was %d nodes; the warning said %s", most, m[1])
			}
		})
	}
}

// fleetNodes is the size of the rollout tests' fleet.
const fleetNodes = 20

// rolloutFleet adds fleetNodes nodes labelled e2e.dsguard.io/fleet=rollout
// for one test, which removes them when it ends, and returns their number.
func rolloutFleet(t *testing.T) int {
	t.Helper()
	var fleet []framework.Node
	for i := range fleetNodes {
		fleet = append(fleet, framework.Node{Name: fmt.Sprintf("fleet-%02d", i+1), Labels: map[string]string{"e2e.dsguard.io/fleet": "rollout"}})
	}
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		if r := cluster.Kubectl(ctx, "", "delete", "nodes", "-l", "e2e.dsguard.io/fleet=rollout"); r.Err != nil {
			t.Errorf("cleanup: %v", r.Error())
		}
	})
	if err := cluster.CreateNodes(t.Context(), fleet); err != nil {
		t.Fatal(err)
	}
	return fleetNodes
}

// fleetAgent is a DaemonSet on the rollout fleet only.
func fleetAgent(name string, strategy *appsv1.RollingUpdateDaemonSet) *appsv1.DaemonSet {
	ds := daemonSet(name, tolerateAll)
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"e2e.dsguard.io/fleet": "rollout"}
	ds.Spec.UpdateStrategy.RollingUpdate = strategy
	return ds
}

// TestRollout_DurationEstimateFromObservedReadyTimes: the test's kubelet
// reports each Pod ready a fixed delay after its creation, as a slow agent
// would; once the agent's Pods have shown it, an image change on 20 nodes,
// 5 at a time, warns an estimate of the rollout's length from their time
// to Ready, and the real rollout goes in as many rounds as the estimate
// counts, each no shorter than the Pods' time to Ready.
func TestRollout_DurationEstimateFromObservedReadyTimes(t *testing.T) {
	const readyAfter = 3 * time.Second
	nodes := rolloutFleet(t)
	name := "timed-agent"
	create(t, fleetAgent(name, &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("25%"))}))
	stop, observedRounds := scriptedKubelet(t, name, readyAfter)
	defer stop()
	waitStatus(t, name, func(d *appsv1.DaemonSet) bool { return d.Status.NumberAvailable == int32(nodes) })
	// The estimate must stand on these Pods' own times to Ready; under load
	// they run past readyAfter, so the test works out what dsguard should
	// have seen rather than assuming readyAfter.
	median, sampled := medianReadyTime(podsOf(t, name))

	start := time.Now()
	r := cluster.Kubectl(t.Context(), "", "set", "image", "daemonset/"+name, "-n", "audit", "agent=example/agent:v2")
	t.Logf("$ %s\n%s%s", r.Command, r.Stdout, r.Stderr)
	m := regexp.MustCompile(`rollout-impact: the rollout takes about (\S+), an estimate: (\d+) rounds? of about (\S+) per Pod ` +
		`\(the agent's Pods took a median (\S+) from creation to Ready, over (\d+) of them, \+ minReadySeconds 0\)`).FindStringSubmatch(r.Stderr)
	if r.ExitCode != 0 || m == nil {
		t.Fatalf("kubectl set image: exit %d; no estimate in:\n%s", r.ExitCode, r.Stderr)
	}
	estimate, rounds, perPod, warnedMedian, over := duration(t, m[1]), atoi(t, m[2]), duration(t, m[3]), duration(t, m[4]), atoi(t, m[5])
	if warnedMedian != median || over != sampled {
		t.Errorf("the warning's median is %s over %d Pods; the Pods show %s over %d", warnedMedian, over, median, sampled)
	}
	if perPod != median {
		t.Errorf("the warning counts %s per Pod; with minReadySeconds 0 that is the median, %s", perPod, median)
	}
	// The total is printed to the second.
	if d := estimate - time.Duration(rounds)*perPod; d < -time.Second/2 || d > time.Second/2 {
		t.Errorf("the warning's total %s is not its %d rounds of %s", estimate, rounds, perPod)
	}

	waitWithin(t, 3*time.Minute, "the rollout of "+name+" to finish", func() (bool, error) {
		return updatedAndAvailable(podsOf(t, name)) == nodes, nil
	})
	took := time.Since(start)
	went := observedRounds()
	t.Logf("estimated %s in %d rounds; the rollout took %s in %d rounds (%.0f%%)",
		estimate, rounds, took.Round(100*time.Millisecond), went, 100*took.Seconds()/estimate.Seconds())
	if went != rounds {
		t.Errorf("the rollout went in %d rounds; the warning said %d", went, rounds)
	}
	// The kubelet waits readyAfter from a creation time cut to the second,
	// so a round lasts more than readyAfter less a second, and the estimate
	// from whole-second timestamps can itself run a second per round over
	// the real one: took is held to that floor, not to the estimate. The
	// upper bound only catches an estimate that is far too small.
	if floor := time.Duration(went) * (readyAfter - time.Second); took < floor {
		t.Errorf("the rollout took %s, less than %d rounds of %s: the kubelet's rounds are miscounted",
			took.Round(100*time.Millisecond), went, readyAfter-time.Second)
	}
	if took > 4*estimate {
		t.Errorf("the rollout took %s, over 4 times the estimate of %s", took.Round(100*time.Millisecond), estimate)
	}
}

// medianReadyTime is the median time from creation to Ready of the ready
// Pods, as dsguard works it out (the upper median), and their number.
func medianReadyTime(pods []corev1.Pod) (time.Duration, int) {
	var took []time.Duration
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || !podReady(p) {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.LastTransitionTime.After(p.CreationTimestamp.Time) {
				took = append(took, c.LastTransitionTime.Sub(p.CreationTimestamp.Time))
			}
		}
	}
	if len(took) == 0 {
		return 0, 0
	}
	slices.Sort(took)
	return took[len(took)/2], len(took)
}

func duration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// scriptedKubelet plays the scheduler and the kubelet for the DaemonSet's
// Pods until stopped: it binds each new Pod, reports it ready readyAfter
// its creation (the time of its Ready condition), and confirms deletions at
// once. rounds says how many rounds the rollout to example/agent:v2 went
// in so far: a new Pod belongs to the round after the latest one that had
// a Pod ready before it appeared, since the controller replaces more only
// as new Pods turn ready. Counting by cause rather than by clock keeps the
// count right however slow a loaded machine makes each round.
func scriptedKubelet(t *testing.T, name string, readyAfter time.Duration) (stop func(), rounds func() int) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	skip := func(err error) bool {
		return err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil
	}
	var mu sync.Mutex
	roundOf, readyRound, last := map[types.UID]int{}, 0, 0
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pods, err := kube.CoreV1().Pods("audit").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("scripted kubelet: %v", err)
				}
				return
			}
			// Every Pod in the list existed before this pass marks any
			// ready, so its round is settled before the marks.
			mu.Lock()
			for i := range pods.Items {
				p := &pods.Items[i]
				if _, seen := roundOf[p.UID]; !seen && p.Spec.Containers[0].Image == "example/agent:v2" {
					roundOf[p.UID] = readyRound + 1
					last = max(last, readyRound+1)
				}
			}
			mu.Unlock()
			for i := range pods.Items {
				p := &pods.Items[i]
				switch {
				case p.DeletionTimestamp != nil:
					err = kube.CoreV1().Pods("audit").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				case p.Spec.NodeName == "":
					err = kube.CoreV1().Pods("audit").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: "audit"},
						Target: corev1.ObjectReference{Kind: "Node", Name: targetNode(p)}}, metav1.CreateOptions{})
				case !podReady(p) && time.Since(p.CreationTimestamp.Time) >= readyAfter:
					markReady(p)
					now := metav1.Now()
					for j := range p.Status.Conditions {
						p.Status.Conditions[j].LastTransitionTime = now
					}
					if _, err = kube.CoreV1().Pods("audit").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err == nil {
						mu.Lock()
						readyRound = max(readyRound, roundOf[p.UID])
						mu.Unlock()
					}
				}
				if !skip(err) {
					t.Errorf("scripted kubelet, Pod %s: %v", p.Name, err)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }, func() int { mu.Lock(); defer mu.Unlock(); return last }
}

// TestRollout_StallPredictedExactlyWhenItHappens: a node stops (its Pods
// turn unready and it gets the unreachable taints, as the node lifecycle
// controller does); an image change then warns that the rollout will stall
// when the down node holds the whole maxUnavailable window, and the real
// controller indeed stops with updatedNumberScheduled flat; with a window
// of two the warning says one unit is held, and the rollout finishes on the
// nodes that are up.
func TestRollout_StallPredictedExactlyWhenItHappens(t *testing.T) {
	const down, nodes = "worker-1", 4
	for _, tc := range []struct {
		window int32
		warns  string
		stalls bool
	}{
		{window: 1, stalls: true, warns: "rollout-impact: the rollout will stall: 1 covered node is NotReady or unreachable (worker-1)"},
		{window: 2, warns: "rollout-impact: 1 of the rollout's 2 nodes at a time is held for good by covered nodes that are NotReady or unreachable (worker-1): it moves 1 at a time"},
	} {
		t.Run(fmt.Sprintf("maxUnavailable %d", tc.window), func(t *testing.T) {
			name := fmt.Sprintf("down-agent-%d", tc.window)
			ds := daemonSet(name, tolerateAll)
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(tc.window))
			create(t, ds)
			runPods(t, name, nodes)
			waitStatus(t, name, func(d *appsv1.DaemonSet) bool { return d.Status.NumberAvailable == nodes })
			takeDown(t, down, name)

			// dsguard's node view follows the taint within moments: a
			// server-side dry run says what the change would do until it
			// names the down node.
			change := []string{"set", "image", "daemonset/" + name, "-n", "audit", "agent=example/agent:v2"}
			waitFor(t, "the warning to name the down node", func() (bool, error) {
				r := cluster.Kubectl(t.Context(), "", append(change, "--dry-run=server")...)
				return strings.Contains(r.Stderr, tc.warns), nil
			})
			r := cluster.Kubectl(t.Context(), "", change...)
			t.Logf("$ %s\n%s%s", r.Command, r.Stdout, r.Stderr)
			if r.ExitCode != 0 || !strings.Contains(r.Stderr, "Warning: "+tc.warns) {
				t.Fatalf("exit %d; want the warning %q in:\n%s", r.ExitCode, tc.warns, r.Stderr)
			}

			// Play the kubelet of the nodes that are up (the down one
			// confirms nothing), and watch the controller.
			playUp := func() {
				for _, p := range podsOf(t, name) {
					if targetNode(&p) == down {
						continue
					}
					if p.DeletionTimestamp != nil {
						_ = kube.CoreV1().Pods("audit").Delete(t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
					}
				}
				startPods(t, name, down)
			}
			if !tc.stalls {
				waitFor(t, "the rollout to finish on the nodes that are up", func() (bool, error) {
					playUp()
					return updatedAndAvailable(podsOf(t, name)) == nodes-1, nil
				})
				return
			}
			// Stalled: for 10 s of the kubelet doing its part, no old Pod on
			// a node that is up is deleted, and updatedNumberScheduled stays
			// at most 1 (the down node's own new Pod, if the controller
			// makes one there).
			// The status counts the new template only once the controller
			// has observed it: counts from before say nothing, and at least
			// one after must be seen.
			observed := false
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
				playUp()
				for _, p := range podsOf(t, name) {
					if targetNode(&p) != down && (p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != "example/agent:v1") {
						t.Fatalf("the rollout went on: Pod %s on %s replaced", p.Name, targetNode(&p))
					}
				}
				d, err := kube.AppsV1().DaemonSets("audit").Get(t.Context(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if d.Status.ObservedGeneration < d.Generation {
					continue
				}
				observed = true
				if d.Status.UpdatedNumberScheduled > 1 {
					t.Fatalf("updatedNumberScheduled %d: the rollout did not stall", d.Status.UpdatedNumberScheduled)
				}
			}
			if !observed {
				t.Fatal("the controller never reported on the new template within 10 s")
			}
		})
	}
}

// takeDown does to node what the node lifecycle controller does when a
// kubelet stops posting: the unreachable taints, and the node's Pods of the
// DaemonSet marked not ready. The taints go when the test ends.
func takeDown(t *testing.T, node, daemonSet string) {
	t.Helper()
	taints := []corev1.Taint{
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
	}
	setTaints := func(ctx context.Context, add bool) error {
		n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == corev1.TaintNodeUnreachable })
		if add {
			n.Spec.Taints = append(n.Spec.Taints, taints...)
		}
		_, err = kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		if err := setTaints(ctx, false); err != nil {
			t.Errorf("cleanup: lifting the unreachable taints of %s: %v", node, err)
		}
	})
	if err := setTaints(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	for _, p := range podsOf(t, daemonSet) {
		if targetNode(&p) == node {
			setPodStatus(t, p.Name, false)
		}
	}
}

// startPods plays the scheduler and the kubelet for a rollout in progress:
// it binds each new Pod to its node and reports it ready, except on down,
// whose kubelet is gone. The controller deletes and makes Pods meanwhile:
// a Pod gone or changed since the list is left to the next round.
func startPods(t *testing.T, name, down string) {
	t.Helper()
	skip := func(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
	for _, p := range podsOf(t, name) {
		if p.DeletionTimestamp != nil || podReady(&p) || targetNode(&p) == down {
			continue
		}
		if err := bind(t, &p); err != nil && !skip(err) && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("binding %s: %v", p.Name, err)
		}
		cur, err := kube.CoreV1().Pods("audit").Get(t.Context(), p.Name, metav1.GetOptions{})
		if skip(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		markReady(cur)
		if _, err := kube.CoreV1().Pods("audit").UpdateStatus(t.Context(), cur, metav1.UpdateOptions{}); err != nil && !skip(err) {
			t.Fatalf("status of %s: %v", p.Name, err)
		}
	}
}
