package coverage

import (
	"fmt"
	"maps"
	"os"
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
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/coverage"
)

const (
	defaultScenarios = 300
	// defaultNodeRounds is the node-change rounds per scenario in
	// `make test`; `make e2e-long` runs more.
	defaultNodeRounds = 1
	batchSize         = 60
	workers           = 16
)

// run state of one scenario.
type result struct {
	*scenario
	nodes     []*corev1.Node // as the API server stores them
	predicted coverage.Coverage
	eligible  []string // predicted eligible nodes, sorted
	created   *appsv1.DaemonSet
	status    appsv1.DaemonSetStatus
	settled   bool
	podNodes  []string
	added     int // nodes the node-change rounds added
}

func envInt(name string, def uint64) (uint64, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %v", name, v, err)
	}
	return n, nil
}

// TestCoverageMatchesDaemonSetController is the differential test: for each
// generated scenario the prediction's Eligible must equal the controller's
// desiredNumberScheduled, and the nodes the prediction does not skip must be
// exactly those the controller creates Pods for.
func TestCoverageMatchesDaemonSetController(t *testing.T) {
	// A new seed each run, printed first: DSGUARD_DIFF_SEED replays one.
	seed, err := envInt("DSGUARD_DIFF_SEED", uint64(time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	total, err := envInt("DSGUARD_DIFF_SCENARIOS", defaultScenarios)
	if err != nil {
		t.Fatal(err)
	}
	rounds, err := envInt("DSGUARD_DIFF_NODE_ROUNDS", defaultNodeRounds)
	if err != nil {
		t.Fatal(err)
	}
	replay := fmt.Sprintf("DSGUARD_DIFF_SEED=%d DSGUARD_DIFF_SCENARIOS=%d DSGUARD_DIFF_NODE_ROUNDS=%d", seed, total, rounds)
	fmt.Fprintf(os.Stderr, "coverage differential: seed %d, %d scenarios, %d node-change rounds each (replay with %s)\n", seed, total, rounds, replay)
	// The summary lines are "figures: " lines, which hack/e2e-summary.sh
	// keeps from a passing run.
	t.Logf("figures: seed %d (replay with %s)", seed, replay)
	defer func() {
		if t.Failed() {
			t.Logf("reproduce with %s", replay)
		}
	}()

	start := time.Now()
	var (
		st  stats
		rst roundStats
	)
	for b := 0; b*batchSize < int(total); b++ {
		var batch []*result
		for id := b * batchSize; id < min((b+1)*batchSize, int(total)); id++ {
			batch = append(batch, &result{scenario: generate(seed, id, b, namespace)})
		}
		failedBefore := st.failed
		runBatch(t, b, batch, &st)
		// Node changes on a batch that agreed: a round compares the Pods it
		// ends with against those the first verdict left.
		if st.failed == failedBefore {
			runNodeRounds(t, seed, b, int(rounds), batch, &rst)
		}
		removeBatch(t, batch)
		if t.Failed() && st.failed+rst.failed >= 10 {
			t.Logf("stopping after %d failed scenarios and %d failed node-change rounds", st.failed, rst.failed)
			break
		}
	}
	t.Logf("figures: %d scenarios (%d nodes, %d node classes) ran in %s; %d failed",
		st.scenarios, st.nodes, st.classes, time.Since(start).Round(time.Millisecond), st.failed)
	t.Logf("figures: predicted coverage: %d none, %d partial, %d every node; %d Pods checked node by node",
		st.none, st.partial, st.full, st.pods)
	t.Logf("figures: skips seen: %s", st.kindSummary())
	if rounds > 0 {
		t.Logf("figures: %s", rst.summary())
	}
	// Shares mean something from a hundred scenarios on; a short run
	// (DSGUARD_DIFF_SCENARIOS) only logs them.
	if st.scenarios == int(total) && total >= 100 {
		st.checkBreadth(t)
		if rounds > 0 {
			rst.checkBreadth(t)
		}
	}
}

// removeBatch deletes a finished batch's DaemonSets (the garbage collector
// takes their Pods) and nodes, so that the cluster, and the controller's
// work per node event, stays the size of one batch however long the run.
func removeBatch(t *testing.T, batch []*result) {
	ctx := t.Context()
	var names []string
	for _, res := range batch {
		names = append(names, res.ds.Name)
		for _, n := range res.nodes {
			names = append(names, "node/"+n.Name)
		}
	}
	err := parallel(len(names), func(i int) error {
		var err error
		if node, ok := strings.CutPrefix(names[i], "node/"); ok {
			err = client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
		} else {
			err = client.AppsV1().DaemonSets(namespace).Delete(ctx, names[i], metav1.DeleteOptions{})
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatalf("removing a finished batch: %v", err)
	}
}

type stats struct {
	scenarios, nodes, classes, failed int
	none, partial, full, pods         int
	kinds                             map[string]int // skipped nodes by kind
	kindScenarios                     map[string]int // scenarios with a skip of the kind
}

// breadth is the least share of the scenarios each outcome and each kind of
// skip must have, so that the agreement with the controller says something
// about every one of them. The generator gives each well over twice this
// share for any seed tried (none, partial and every node at 18% or more;
// selector 40%, untolerated NoSchedule 20%, OS or architecture 10%,
// NoExecute 10%, transient 7%, nodeName 5%).
var breadth = []struct {
	what    string
	percent int
	count   func(*stats) int
}{
	{"runs on no node", 10, func(s *stats) int { return s.none }},
	{"runs on some nodes", 10, func(s *stats) int { return s.partial }},
	{"runs on every node", 10, func(s *stats) int { return s.full }},
	{"selector skips", 20, func(s *stats) int { return s.kindScenarios["selector"] }},
	{"untolerated NoSchedule taints", 10, func(s *stats) int { return s.kindScenarios["taint(NoSchedule)"] }},
	{"untolerated NoExecute taints", 5, func(s *stats) int { return s.kindScenarios["taint(NoExecute)"] }},
	{"transient taints", 3, func(s *stats) int { return s.kindScenarios["taint(NoSchedule)transient"] }},
	{"OS or architecture skips", 5, func(s *stats) int { return s.kindScenarios["os-arch"] }},
	{"nodeName skips", 2, func(s *stats) int { return s.kindScenarios["nodeName"] }},
}

// checkBreadth fails when the generator left an outcome or a kind of skip
// out, or nearly so: a differential test that never sees a case proves
// nothing about it.
func (s *stats) checkBreadth(t *testing.T) {
	t.Helper()
	for _, b := range breadth {
		want := s.scenarios * b.percent / 100
		if got := b.count(s); got < want || got == 0 {
			t.Errorf("%s in %d of %d scenarios, want at least %d (%d%%): the generator lost breadth",
				b.what, got, s.scenarios, max(want, 1), b.percent)
		}
	}
}

func (s *stats) kindSummary() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.kinds)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.kinds[k]))
	}
	return strings.Join(parts, ", ")
}

// parallel runs f for 0..n-1 on a few goroutines and returns the first error.
func parallel(n int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func runBatch(t *testing.T, b int, batch []*result, st *stats) {
	ctx := t.Context()
	t0 := time.Now()

	// Nodes first, with exactly the generated taints.
	type nodeRef struct{ r, i int }
	var refs []nodeRef
	for r, res := range batch {
		res.nodes = make([]*corev1.Node, len(res.scenario.nodes))
		for i := range res.scenario.nodes {
			refs = append(refs, nodeRef{r, i})
		}
	}
	err := parallel(len(refs), func(k int) error {
		res := batch[refs[k].r]
		node, err := createNode(ctx, res.scenario.nodes[refs[k].i])
		res.nodes[refs[k].i] = node
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tNodes := time.Since(t0)

	// Predict on the nodes as stored, then create the DaemonSets.
	for _, res := range batch {
		snap := coverage.NewNodeSnapshot(res.nodes)
		res.predicted = coverage.Predict(res.ds, snap)
		res.eligible = eligibleNodes(res.nodes, res.predicted)
		st.scenarios++
		st.nodes += len(res.nodes)
		st.classes += snap.Classes()
		if err := checkCoverageShape(res); err != nil {
			t.Errorf("scenario %d: %v\n%s", res.id, err, report(res))
			st.failed++
		}
	}
	err = parallel(len(batch), func(i int) error {
		created, err := client.AppsV1().DaemonSets(namespace).Create(ctx, batch[i].ds, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating DaemonSet of scenario %d: %w\n%s", batch[i].id, err, toYAML(batch[i].ds))
		}
		batch[i].created = created
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The same prediction over every node of every scenario so far: the
	// scenario label leaves the others selector-skipped.
	all, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allNodes := make([]*corev1.Node, len(all.Items))
	for i := range all.Items {
		allNodes[i] = &all.Items[i]
	}
	allSnap := coverage.NewNodeSnapshot(allNodes)
	for _, res := range batch {
		c := coverage.Predict(res.ds, allSnap)
		if c.Eligible != res.predicted.Eligible || !slices.Equal(eligibleNodes(allNodes, c), res.eligible) {
			t.Errorf("scenario %d: over all %d nodes the prediction is %d eligible %v, over its own nodes %d %v\n%s",
				res.id, len(allNodes), c.Eligible, eligibleNodes(allNodes, c), res.predicted.Eligible, res.eligible, report(res))
			st.failed++
		}
		if c.Total != len(allNodes) || c.Eligible+c.Skipped() != c.Total {
			t.Errorf("scenario %d: over all nodes Total %d, Eligible %d, Skipped %d; want Total %d = Eligible + Skipped",
				res.id, c.Total, c.Eligible, c.Skipped(), len(allNodes))
		}
	}
	// The CLI's printed placement, from the same nodes saved to a file.
	var dss []*appsv1.DaemonSet
	for _, res := range batch {
		dss = append(dss, res.ds)
	}
	cli, err := cliPlacements(t.TempDir(), dss, allNodes)
	if err != nil {
		t.Fatal(err)
	}
	tCreate := time.Since(t0)

	// Wait for the controller's verdicts: each status until it agrees with
	// the prediction, or the deadline passes. A status may disagree for a
	// while after the controller has observed the DaemonSet (its node
	// informer can lag the node writes, by seconds on a loaded machine) and
	// then agree: only one that still disagrees at the deadline is a
	// mismatch, reported below with that last status.
	timeout := 60 * time.Second
	if b == 0 {
		timeout = 120 * time.Second // informers sync first
	}
	deadline := time.Now().Add(timeout)
	pending := len(batch)
	for pending > 0 {
		if !kcm.Running() {
			t.Fatalf("kube-controller-manager is gone:\n%s", tail(kcm.Log(), 40))
		}
		list, err := client.AppsV1().DaemonSets(namespace).List(ctx, metav1.ListOptions{LabelSelector: batchLabel + "=" + strconv.Itoa(b)})
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*appsv1.DaemonSet{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		now := time.Now()
		pending = 0
		for _, res := range batch {
			if res.settled {
				continue
			}
			ds := byName[res.ds.Name]
			if ds == nil {
				t.Fatalf("DaemonSet %s is gone", res.ds.Name)
			}
			res.status = ds.Status
			s := ds.Status
			if s.ObservedGeneration >= ds.Generation && int(s.DesiredNumberScheduled) == res.predicted.Eligible &&
				s.CurrentNumberScheduled == s.DesiredNumberScheduled && s.NumberMisscheduled == 0 {
				res.settled = true
				continue
			}
			pending++
		}
		if pending == 0 {
			break
		}
		if now.After(deadline) {
			var unobserved, disagreeing []string
			for _, res := range batch {
				switch {
				case res.settled:
				case res.status.ObservedGeneration < res.created.Generation:
					unobserved = append(unobserved, res.ds.Name)
				default:
					disagreeing = append(disagreeing, res.ds.Name)
				}
			}
			if len(unobserved) > 0 {
				t.Fatalf("batch %d: after %s the controller has not observed %d DaemonSets: %s",
					b, timeout, len(unobserved), strings.Join(unobserved, ", "))
			}
			t.Logf("batch %d: after %s the status of %d DaemonSets still disagrees with the prediction: %s",
				b, timeout, len(disagreeing), strings.Join(disagreeing, ", "))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	tStatus := time.Since(t0)

	// Which nodes did the controller make Pods for?
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: batchLabel + "=" + strconv.Itoa(b)})
	if err != nil {
		t.Fatal(err)
	}
	podNodes := map[string][]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		podNodes[p.Labels[appLabel]] = append(podNodes[p.Labels[appLabel]], targetNode(p))
	}
	for _, res := range batch {
		res.podNodes = podNodes[res.ds.Name]
		slices.Sort(res.podNodes)
		st.pods += len(res.podNodes)
		switch e := res.predicted.Eligible; {
		case e == 0:
			st.none++
		case e == len(res.nodes):
			st.full++
		default:
			st.partial++
		}
		seen := map[string]bool{}
		for _, s := range res.predicted.Skips {
			if st.kinds == nil {
				st.kinds, st.kindScenarios = map[string]int{}, map[string]int{}
			}
			k := string(s.Kind)
			if s.Kind == coverage.SkipTaint {
				k += "(" + string(s.Taint.Effect) + ")"
				if s.Transient {
					k += "transient"
				}
			}
			st.kinds[k] += s.Count
			if !seen[k] {
				seen[k] = true
				st.kindScenarios[k]++
			}
		}
		var problems []string
		if int(res.status.DesiredNumberScheduled) != res.predicted.Eligible {
			problems = append(problems, fmt.Sprintf("desiredNumberScheduled %d, predicted Eligible %d",
				res.status.DesiredNumberScheduled, res.predicted.Eligible))
		}
		if !slices.Equal(res.podNodes, res.eligible) {
			problems = append(problems, fmt.Sprintf("the controller made Pods for %v, the prediction leaves eligible %v",
				res.podNodes, res.eligible))
		}
		if printed, ok := cli[res.ds.Name]; !ok || !slices.Equal(res.podNodes, printed) {
			problems = append(problems, fmt.Sprintf("the controller made Pods for %v, dsguard check -o json prints %v",
				res.podNodes, printed))
		}
		if res.status.NumberMisscheduled != 0 {
			problems = append(problems, fmt.Sprintf("numberMisscheduled %d", res.status.NumberMisscheduled))
		}
		if len(problems) > 0 {
			t.Errorf("scenario %d disagrees with the DaemonSet controller: %s\n%s", res.id, strings.Join(problems, "; "), report(res))
			st.failed++
		}
	}
	t.Logf("batch %d: %d scenarios, %d nodes: nodes %s, DaemonSets %s, statuses %s, Pods %s",
		b, len(batch), len(refs), tNodes.Round(time.Millisecond), (tCreate - tNodes).Round(time.Millisecond),
		(tStatus - tCreate).Round(time.Millisecond), (time.Since(t0) - tStatus).Round(time.Millisecond))
}

// eligibleNodes returns, sorted, the nodes the prediction does not skip.
func eligibleNodes(nodes []*corev1.Node, c coverage.Coverage) []string {
	skipped := map[string]bool{}
	for _, s := range c.Skips {
		for _, n := range s.Nodes() {
			skipped[n] = true
		}
	}
	var out []string
	for _, n := range nodes {
		if !skipped[n.Name] {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// checkCoverageShape checks what the controller cannot: the prediction
// accounts for every node once, and each Skip's reason holds for its nodes.
func checkCoverageShape(res *result) error {
	c := res.predicted
	if c.Total != len(res.nodes) || c.Eligible+c.Skipped() != c.Total || len(res.eligible) != c.Eligible {
		return fmt.Errorf("Total %d, Eligible %d, Skipped %d, unskipped nodes %d; want Total %d = Eligible + Skipped",
			c.Total, c.Eligible, c.Skipped(), len(res.eligible), len(res.nodes))
	}
	byName := map[string]*corev1.Node{}
	for _, n := range res.nodes {
		byName[n.Name] = n
	}
	seen := map[string]bool{}
	spec := &res.ds.Spec.Template.Spec
	for _, s := range c.Skips {
		for _, name := range s.Nodes() {
			if seen[name] {
				return fmt.Errorf("node %s skipped twice", name)
			}
			seen[name] = true
			n := byName[name]
			switch s.Kind {
			case coverage.SkipNodeName:
				if spec.NodeName == "" || spec.NodeName == name {
					return fmt.Errorf("node %s skipped for nodeName %q", name, spec.NodeName)
				}
			case coverage.SkipTaint:
				if s.Taint.Effect == corev1.TaintEffectPreferNoSchedule ||
					!slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t == s.Taint }) {
					return fmt.Errorf("node %s skipped for taint %v it does not carry or that cannot exclude", name, s.Taint)
				}
			case coverage.SkipSelector, coverage.SkipOSArch:
			default:
				return fmt.Errorf("unknown skip kind %q", s.Kind)
			}
		}
	}
	return nil
}

// targetNode is the node a daemon Pod is for: its nodeName, or the node its
// required affinity pins it to (the controller leaves binding to the
// scheduler).
func targetNode(p *corev1.Pod) string {
	if n := coverage.DaemonPodNode(p); n != "" {
		return n
	}
	return "<unknown " + p.Name + ">"
}

// report describes a scenario for a failure message: its nodes and
// DaemonSet as YAML, the prediction's Skips and the controller's status.
func report(res *result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- scenario %d: predicted Eligible %d of %d; eligible %v\n", res.id, res.predicted.Eligible, res.predicted.Total, res.eligible)
	for _, s := range res.predicted.Skips {
		fmt.Fprintf(&b, "skip %s: %s\n", s.Kind, s.Describe(20))
	}
	fmt.Fprintf(&b, "controller status: %s", toYAML(res.status))
	fmt.Fprintf(&b, "Pods on: %v\n", res.podNodes)
	for _, n := range res.nodes {
		if n == nil {
			continue
		}
		fmt.Fprintf(&b, "---\n%s", toYAML(map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": n.Name, "labels": n.Labels}, "spec": n.Spec}))
	}
	fmt.Fprintf(&b, "---\n%s", toYAML(map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": res.ds.Name, "namespace": res.ds.Namespace}, "spec": res.ds.Spec}))
	return b.String()
}

func toYAML(v any) string {
	out, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>\n", err)
	}
	return string(out)
}
