package coverage

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/dsguard/dsguard/coverage"
)

// Node changes after the DaemonSet exists: each round changes a few of a
// scenario's nodes (taints added and lifted, labels changed, nodes added and
// removed, unschedulable flipped), predicts again on the nodes as stored,
// and compares with what the controller does next.
//
// Kubernetes 1.37's DaemonSet controller handles a node update in a queue
// of its own (syncNodeUpdate) that re-syncs a DaemonSet only when the
// Pods indexed to that node by spec.nodeName call for it. No scheduler runs
// here, so the daemon Pods stay unbound and that path never fires; and even
// with bound Pods, a node that gains a NoSchedule taint its Pod keeps
// running through re-syncs nothing, leaving desiredNumberScheduled stale.
// So once the nodes are written, every DaemonSet of the batch is nudged
// alike, agreeing or not: a change of spec.revisionHistoryLimit, which
// leaves the template (and so the Pods) alone but bumps the generation, so
// that status.observedGeneration tells when a sync that started after the
// nudge has ended. The controller has settled when a sync started after
// its state had stood still changes nothing: nudge, wait until every
// DaemonSet has observed the nudge and the statuses and Pods stay the same
// for a while, and again, until two such states in a row are equal. Only
// then is the prediction compared, and a disagreement fails: the
// prediction never decides when to stop waiting or what to nudge.
//
// The prediction says where the controller wants Pods (Eligible). A Pod the
// DaemonSet already has on a node that stops qualifying only because of a
// NoSchedule taint it does not tolerate keeps running, and the controller
// counts it misscheduled (NodeShouldRunDaemonPod's shouldContinueRunning);
// any other change that disqualifies the node deletes the Pod. So after a
// round the Pods must be on exactly the eligible nodes plus the nodes that
// kept theirs, and numberMisscheduled must count the latter.

// changeKind is one kind of node change.
type changeKind string

const (
	changeTaintAdded    changeKind = "taint added"
	changeTaintLifted   changeKind = "taint lifted"
	changeLabel         changeKind = "label changed"
	changeLabelRemoved  changeKind = "label removed"
	changeNodeAdded     changeKind = "node added"
	changeNodeRemoved   changeKind = "node removed"
	changeUnschedulable changeKind = "unschedulable flipped"
)

// changeWeights is how often each kind is drawn.
var changeWeights = []struct {
	kind   changeKind
	weight int
}{
	{changeTaintAdded, 30}, {changeTaintLifted, 20}, {changeLabel, 20}, {changeLabelRemoved, 6},
	{changeNodeAdded, 10}, {changeNodeRemoved, 10}, {changeUnschedulable, 4},
}

// nodeChange is one planned change to a scenario's nodes.
type nodeChange struct {
	kind changeKind
	node string
	// mutate changes a stored node in place (taints, labels, unschedulable).
	mutate func(*corev1.Node)
	// create is the node to add.
	create *corev1.Node
}

// roundStats counts what the node-change rounds exercised.
type roundStats struct {
	rounds, changed, kept, deleted, failed int
	kinds                                  map[changeKind]int
}

// planChanges draws a round of changes for one scenario from its own stream
// of the seed, so that a round replays the same for the same seed.
func planChanges(seed uint64, res *result, round int) []nodeChange {
	g := &gen{r: rand.New(rand.NewPCG(seed, uint64(res.id)|uint64(round+1)<<40)), id: res.id}
	total := 0
	for _, w := range changeWeights {
		total += w.weight
	}
	var changes []nodeChange
	touched := map[string]bool{} // one change per node per round
	for range 1 + g.r.IntN(3) {
		x, kind := g.r.IntN(total), changeKind("")
		for _, w := range changeWeights {
			if x < w.weight {
				kind = w.kind
				break
			}
			x -= w.weight
		}
		if c, ok := g.change(kind, res, touched); ok {
			changes = append(changes, c)
		}
	}
	return changes
}

// change builds one change of kind, or reports that none fits the scenario
// (no tainted node to lift a taint from, say).
func (g *gen) change(kind changeKind, res *result, touched map[string]bool) (nodeChange, bool) {
	var free []*corev1.Node
	for _, n := range res.nodes {
		if !touched[n.Name] {
			free = append(free, n)
		}
	}
	if kind == changeNodeAdded || len(free) == 0 {
		n := g.newNode(res)
		touched[n.Name] = true
		return nodeChange{kind: changeNodeAdded, node: n.Name, create: n}, true
	}
	// Mostly a node with a Pod, where a change can also take one away.
	node := pick(g, free)
	if withPod := slices.DeleteFunc(slices.Clone(free), func(n *corev1.Node) bool {
		return !slices.Contains(res.podNodes, n.Name)
	}); len(withPod) > 0 && g.chance(0.7) {
		node = pick(g, withPod)
	}
	touched[node.Name] = true
	c := nodeChange{kind: kind, node: node.Name}
	switch kind {
	case changeTaintAdded:
		taints := g.addTaint(node.Spec.Taints)
		c.mutate = func(n *corev1.Node) { n.Spec.Taints = taints }
	case changeTaintLifted:
		if len(node.Spec.Taints) == 0 {
			return nodeChange{}, false
		}
		i := g.r.IntN(len(node.Spec.Taints))
		lifted := node.Spec.Taints[i]
		c.mutate = func(n *corev1.Node) {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&lifted) })
		}
	case changeLabel:
		key := g.selectedKey(res)
		value := pick(g, append(g.values(key, res.nodes, 1), labelValues[key]...))
		if key == keyHostname {
			value = pick(g, []string{node.Name, "host-0", "moved"})
		}
		c.mutate = func(n *corev1.Node) { n.Labels[key] = value }
	case changeLabelRemoved:
		key := g.selectedKey(res)
		if g.chance(0.1) {
			key = scenarioLabel // the node leaves the scenario's selector
		}
		c.mutate = func(n *corev1.Node) { delete(n.Labels, key) }
	case changeNodeRemoved:
	case changeUnschedulable:
		c.mutate = func(n *corev1.Node) { n.Spec.Unschedulable = !n.Spec.Unschedulable }
	}
	return c, true
}

// selectedKey picks a label key the DaemonSet selects on, mostly, so that
// label changes move nodes in and out of its selection.
func (g *gen) selectedKey(res *result) string {
	spec := &res.ds.Spec.Template.Spec
	var keys []string
	for k := range spec.NodeSelector {
		if k != scenarioLabel {
			keys = append(keys, k)
		}
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range term.MatchExpressions {
				keys = append(keys, r.Key)
			}
		}
	}
	slices.Sort(keys) // map order is random; the stream must not be
	keys = slices.Compact(keys)
	if len(keys) == 0 || g.chance(0.25) {
		return pick(g, selectorKeys)
	}
	return pick(g, keys)
}

// newNode makes a node for the scenario like one it has (its labels and
// taints, now and then one taint more or less), or a new pool's.
func (g *gen) newNode(res *result) *corev1.Node {
	res.added++
	name := fmt.Sprintf("%s-a%d", scenarioName(res.id), res.added)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if len(res.nodes) > 0 && g.chance(0.8) {
		like := pick(g, res.nodes)
		maps.Copy(node.Labels, like.Labels)
		node.Spec.Taints = slices.Clone(like.Spec.Taints)
		node.Spec.Unschedulable = like.Spec.Unschedulable
	} else {
		p := g.pool()
		maps.Copy(node.Labels, p.labels)
		node.Spec.Taints, node.Spec.Unschedulable = p.taints, p.unschedulable
	}
	node.Labels[scenarioLabel] = strconv.Itoa(res.id)
	node.Labels[keyHostname] = name
	if g.chance(0.2) {
		node.Spec.Taints = g.addTaint(node.Spec.Taints)
	}
	if len(node.Spec.Taints) == 0 {
		node.Spec.Taints = nil
	}
	return node
}

// createNode creates want and sets its taints to exactly the generated ones:
// admission adds node.kubernetes.io/not-ready:NoSchedule to every new Node.
func createNode(ctx context.Context, want *corev1.Node) (*corev1.Node, error) {
	node, err := client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating node %s: %w", want.Name, err)
	}
	if slices.Equal(node.Spec.Taints, want.Spec.Taints) {
		return node, nil
	}
	node, err = updateNode(ctx, node, func(n *corev1.Node) { n.Spec.Taints = want.Spec.Taints })
	if err != nil {
		return nil, fmt.Errorf("setting the taints of node %s: %w", want.Name, err)
	}
	return node, nil
}

// updateNode applies mutate to node and writes it, reading it again and
// reapplying on a conflict.
func updateNode(ctx context.Context, node *corev1.Node, mutate func(*corev1.Node)) (*corev1.Node, error) {
	node = node.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mutate(node)
		updated, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		if err == nil {
			node = updated
			return nil
		}
		if apierrors.IsConflict(err) {
			if fresh, gerr := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); gerr == nil {
				node = fresh
			}
		}
		return err
	})
	return node, err
}

// applyChanges writes a scenario's changes and leaves res.nodes as stored.
func applyChanges(ctx context.Context, res *result, changes []nodeChange) error {
	for _, c := range changes {
		switch {
		case c.create != nil:
			n, err := createNode(ctx, c.create)
			if err != nil {
				return err
			}
			res.nodes = append(res.nodes, n)
		case c.kind == changeNodeRemoved:
			if err := client.CoreV1().Nodes().Delete(ctx, c.node, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("removing node %s: %w", c.node, err)
			}
			res.nodes = slices.DeleteFunc(res.nodes, func(n *corev1.Node) bool { return n.Name == c.node })
		default:
			i := slices.IndexFunc(res.nodes, func(n *corev1.Node) bool { return n.Name == c.node })
			n, err := updateNode(ctx, res.nodes[i], c.mutate)
			if err != nil {
				return fmt.Errorf("%s on node %s: %w", c.kind, c.node, err)
			}
			res.nodes[i] = n
		}
	}
	return nil
}

// expectation is what a round's controller must end at for one scenario.
type expectation struct {
	changes   []nodeChange
	eligible  int
	podNodes  []string // sorted
	kept      []string // nodes that keep a Pod they no longer qualify for
	before    []string // the Pods' nodes before the round
	predicted coverage.Coverage
}

func (e *expectation) agrees(s *statusAndPods) bool {
	return int(s.status.DesiredNumberScheduled) == e.eligible && int(s.status.NumberMisscheduled) == len(e.kept) &&
		int(s.status.CurrentNumberScheduled) == e.eligible && slices.Equal(s.podNodes, e.podNodes)
}

type statusAndPods struct {
	status   appsv1.DaemonSetStatus
	podNodes []string
}

// runNodeRounds runs the node-change rounds on a batch whose scenarios
// agreed with the controller.
func runNodeRounds(t *testing.T, seed uint64, b, rounds int, batch []*result, st *roundStats) {
	ctx := t.Context()
	if st.kinds == nil {
		st.kinds = map[changeKind]int{}
	}
	for round := range rounds {
		t0 := time.Now()
		exp := make([]*expectation, len(batch))
		for i, res := range batch {
			exp[i] = &expectation{changes: planChanges(seed, res, round), before: res.podNodes}
		}
		if err := parallel(len(batch), func(i int) error { return applyChanges(ctx, batch[i], exp[i].changes) }); err != nil {
			t.Fatal(err)
		}
		for i, res := range batch {
			e := exp[i]
			e.predicted = coverage.Predict(res.ds, coverage.NewNodeSnapshot(res.nodes))
			e.eligible = e.predicted.Eligible
			e.podNodes = eligibleNodes(res.nodes, e.predicted)
			for _, n := range res.nodes {
				if slices.Contains(e.before, n.Name) && !slices.Contains(e.podNodes, n.Name) && coverage.KeepsRunning(res.ds, n) {
					e.kept = append(e.kept, n.Name)
				}
			}
			e.podNodes = append(e.podNodes, e.kept...)
			slices.Sort(e.podNodes)
			for _, c := range e.changes {
				st.kinds[c.kind]++
			}
		}
		seen := waitForController(t, b, batch, 60*time.Second)
		for i, res := range batch {
			e, s := exp[i], seen[i]
			st.rounds++
			if !slices.Equal(e.podNodes, e.before) {
				st.changed++
			}
			st.kept += len(e.kept)
			for _, n := range e.before {
				if !slices.Contains(e.podNodes, n) {
					st.deleted++
				}
			}
			res.podNodes = s.podNodes
			if !e.agrees(s) {
				st.failed++
				t.Errorf("scenario %d, node-change round %d disagrees with the DaemonSet controller: want desired %d, misscheduled %d, Pods on %v; the controller has desired %d, current %d, misscheduled %d, Pods on %v\n%s",
					res.id, round+1, e.eligible, len(e.kept), e.podNodes,
					s.status.DesiredNumberScheduled, s.status.CurrentNumberScheduled, s.status.NumberMisscheduled, s.podNodes,
					roundReport(res, e))
			}
		}
		t.Logf("batch %d, node-change round %d: %d scenarios in %s", b, round+1, len(batch), time.Since(t0).Round(time.Millisecond))
	}
}

// Settling: a state must stand still for settleQuiet to count, and the
// controller has settleMinNudges nudges at least, so that the last sync
// starts well after the node writes (its node informer can lag them by
// seconds on a loaded machine).
const (
	settleQuiet     = 1500 * time.Millisecond
	settleMinNudges = 2
)

// nudges counts the nudges of the run: each gives spec.revisionHistoryLimit
// a value it has not had, so that every nudge changes the spec.
var nudges int

// settledState is one DaemonSet's status and Pods, as a settled state
// compares them.
type settledState struct {
	status appsv1.DaemonSetStatus // ObservedGeneration left out
	pods   []string               // "name@node", sorted
}

func sameStates(x, y map[string]settledState) bool {
	return maps.EqualFunc(x, y, func(a, b settledState) bool { return reflect.DeepEqual(a, b) })
}

// waitForController nudges the batch's DaemonSets, all alike, until the
// controller has settled (see the comment at the top) or the deadline
// passes, and returns each DaemonSet's status and Pods as it left them.
// Not settling by the deadline fails the test.
func waitForController(t *testing.T, b int, batch []*result, timeout time.Duration) []*statusAndPods {
	ctx := t.Context()
	t0 := time.Now()
	deadline := t0.Add(timeout)
	generations := map[string]int64{}
	var prev map[string]settledState
	for n := 1; ; n++ {
		if err := nudgeAll(ctx, batch, generations); err != nil {
			t.Fatal(err)
		}
		seen, state, ok := waitQuiet(t, b, batch, generations, deadline)
		if !ok {
			t.Errorf("batch %d: the DaemonSet controller did not settle within %s (%d nudges): "+
				"a DaemonSet did not observe the last nudge, or its status or Pods kept changing", b, timeout, n)
			return seen
		}
		if n >= settleMinNudges && sameStates(prev, state) {
			t.Logf("batch %d: the controller settled after %d nudges in %s", b, n, time.Since(t0).Round(time.Millisecond))
			return seen
		}
		prev = state
	}
}

// nudgeAll nudges every DaemonSet of the batch with the same change, and
// records in generations the generation each must be observed at.
func nudgeAll(ctx context.Context, batch []*result, generations map[string]int64) error {
	nudges++
	patch := fmt.Appendf(nil, `{"spec":{"revisionHistoryLimit":%d}}`, 10+nudges)
	got := make([]int64, len(batch))
	err := parallel(len(batch), func(i int) error {
		ds, err := client.AppsV1().DaemonSets(namespace).Patch(ctx, batch[i].ds.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("nudging %s: %w", batch[i].ds.Name, err)
		}
		got[i] = ds.Generation
		return nil
	})
	if err != nil {
		return err
	}
	for i, res := range batch {
		// Without a new generation observedGeneration would say nothing
		// about which sync the status comes from.
		if got[i] <= generations[res.ds.Name] {
			return fmt.Errorf("nudging %s left its generation at %d: the nudge gives no signal", res.ds.Name, got[i])
		}
		generations[res.ds.Name] = got[i]
	}
	return nil
}

// waitQuiet polls the batch's DaemonSets and Pods until every DaemonSet has
// observed its generation, no Pod is left being deleted, and the statuses
// and Pods have stood still for settleQuiet; it returns what it saw last,
// and false if the deadline passed first.
func waitQuiet(t *testing.T, b int, batch []*result, generations map[string]int64, deadline time.Time) ([]*statusAndPods, map[string]settledState, bool) {
	ctx := t.Context()
	seen := make([]*statusAndPods, len(batch))
	var last map[string]settledState
	var since time.Time
	for {
		if !kcm.Running() {
			t.Fatalf("kube-controller-manager is gone:\n%s", tail(kcm.Log(), 40))
		}
		sel := metav1.ListOptions{LabelSelector: batchLabel + "=" + strconv.Itoa(b)}
		list, err := client.AppsV1().DaemonSets(namespace).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		pods, err := client.CoreV1().Pods(namespace).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		nodes := map[string]bool{}
		for _, res := range batch {
			for _, n := range res.nodes {
				nodes[n.Name] = true
			}
		}
		podNodes, podNames := map[string][]string{}, map[string][]string{}
		var gone []string
		for i := range pods.Items {
			p := &pods.Items[i]
			// A Pod bound to its node (a template with nodeName) is only
			// deleted once its kubelet confirms, and one whose node is gone
			// only by the Pod garbage collector: play both, as a cluster
			// would, and count neither.
			if p.DeletionTimestamp != nil || p.Spec.NodeName != "" && !nodes[p.Spec.NodeName] {
				gone = append(gone, p.Name)
				continue
			}
			app := p.Labels[appLabel]
			podNodes[app] = append(podNodes[app], targetNode(p))
			podNames[app] = append(podNames[app], p.Name+"@"+targetNode(p))
		}
		if err := parallel(len(gone), func(i int) error {
			err := client.CoreV1().Pods(namespace).Delete(ctx, gone[i], metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		byName := map[string]*appsv1.DaemonSet{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		state := map[string]settledState{}
		observed := len(gone) == 0
		for i, res := range batch {
			ds := byName[res.ds.Name]
			if ds == nil {
				t.Fatalf("DaemonSet %s is gone", res.ds.Name)
			}
			s := &statusAndPods{status: ds.Status, podNodes: podNodes[res.ds.Name]}
			slices.Sort(s.podNodes)
			seen[i] = s
			observed = observed && ds.Status.ObservedGeneration >= generations[res.ds.Name]
			st := settledState{status: ds.Status, pods: slices.Sorted(slices.Values(podNames[res.ds.Name]))}
			st.status.ObservedGeneration = 0
			state[res.ds.Name] = st
		}
		now := time.Now()
		if !observed || !sameStates(last, state) {
			last, since = state, now
		} else if now.Sub(since) >= settleQuiet {
			return seen, state, true
		}
		if now.After(deadline) {
			return seen, state, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// roundReport describes a round for a failure message: the changes, the
// Pods before, the prediction now and the nodes as they stand.
func roundReport(res *result, e *expectation) string {
	var b strings.Builder
	for _, c := range e.changes {
		fmt.Fprintf(&b, "change: %s on %s\n", c.kind, c.node)
	}
	fmt.Fprintf(&b, "Pods before the round on %v; keeps a Pod (NoSchedule taint only) %v\n", e.before, e.kept)
	r := *res
	r.predicted, r.eligible = e.predicted, eligibleNodes(res.nodes, e.predicted)
	b.WriteString(report(&r))
	return b.String()
}

// checkBreadth fails when the rounds rarely moved, deleted or kept Pods, or
// rarely made a kind of change (a quarter of its weight, in percent of the
// rounds): an agreement on changes that never happen proves nothing.
func (s *roundStats) checkBreadth(t *testing.T) {
	t.Helper()
	want := func(what string, got, percent int) {
		if min := s.rounds * percent / 100; got < min || got == 0 {
			t.Errorf("%s in %d of %d node-change rounds, want at least %d (%d%%): the generator lost breadth",
				what, got, s.rounds, max(min, 1), percent)
		}
	}
	want("a change of where the Pods are", s.changed, 20)
	want("a Pod deleted", s.deleted, 10)
	want("a Pod kept on a node it no longer qualifies for", s.kept, 3)
	for _, w := range changeWeights {
		want("changes of kind "+string(w.kind), s.kinds[w.kind], w.weight/4)
	}
}

func (s *roundStats) summary() string {
	var parts []string
	for _, w := range changeWeights {
		parts = append(parts, fmt.Sprintf("%s %d", w.kind, s.kinds[w.kind]))
	}
	return fmt.Sprintf("%d node-change rounds, %d failed: Pods moved in %d, %d Pods deleted, %d kept misscheduled; changes: %s",
		s.rounds, s.failed, s.changed, s.deleted, s.kept, strings.Join(parts, ", "))
}
