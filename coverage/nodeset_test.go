package coverage

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/dsguard/dsguard/internal/testobj"
)

// referenceCoverage is the prediction done the plain way, node by node with
// no classes and no index: what Predict must always agree with.
func referenceCoverage(ds *appsv1.DaemonSet, nodes []*corev1.Node) Coverage {
	spec := &ds.Spec.Template.Spec
	affinity := nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity)
	relaxed := withoutOSArch(spec)
	tolerations := daemonTolerations(spec)
	cov := Coverage{Total: len(nodes)}
	groups := map[string]*Skip{}
	names := map[*Skip][]string{}
	skip := func(kind SkipKind, taint *corev1.Taint, name string) {
		key := string(kind)
		if taint != nil {
			key += taint.ToString()
		}
		s, ok := groups[key]
		if !ok {
			s = &Skip{Kind: kind}
			if taint != nil {
				s.Taint = *taint
				s.Lifecycle, s.Transient = builtinLifecycle.Reason(taint.Key)
			}
			groups[key] = s
		}
		names[s] = append(names[s], name)
	}
	for _, n := range nodes {
		switch {
		case spec.NodeName != "" && spec.NodeName != n.Name:
			skip(SkipNodeName, nil, n.Name)
		case !must(affinity.Match(n)) && must(relaxed.Match(n)):
			skip(SkipOSArch, nil, n.Name)
		case !must(affinity.Match(n)):
			skip(SkipSelector, nil, n.Name)
		default:
			if taint, untolerated := untoleratedTaint(n.Spec.Taints, tolerations); untolerated {
				skip(SkipTaint, taint, n.Name)
			} else {
				cov.Eligible++
			}
		}
	}
	for _, s := range groups {
		sort.Strings(names[s])
		cov.Skips = append(cov.Skips, s.WithNodes(names[s]...))
	}
	sort.Slice(cov.Skips, func(a, b int) bool {
		if cov.Skips[a].Count != cov.Skips[b].Count {
			return cov.Skips[a].Count > cov.Skips[b].Count
		}
		return cov.Skips[a].Reason() < cov.Skips[b].Reason()
	})
	return cov
}

func must(ok bool, _ error) bool { return ok }

// randomNode makes a node of a small random cluster: a few pools and taints,
// a hostname that is usually the name, sometimes missing, an instance ID on
// most nodes (per-node once there are enough of them).
func randomNode(r *rand.Rand, i int) *corev1.Node {
	name := fmt.Sprintf("n-%03d", i)
	labels := map[string]string{
		corev1.LabelOSStable: []string{"linux", "linux", "windows"}[r.IntN(3)],
		"pool":               fmt.Sprintf("p%d", r.IntN(4)),
	}
	switch r.IntN(10) {
	case 0: // no hostname label
	case 1:
		labels[corev1.LabelHostname] = "other-" + name
	default:
		labels[corev1.LabelHostname] = name
	}
	if r.IntN(8) != 0 {
		labels["example.com/instance-id"] = fmt.Sprintf("i-%d", r.IntN(1000))
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, t := range []corev1.Taint{testobj.NoSchedule("gpu"), testobj.NoExecute(corev1.TaintNodeNotReady), testobj.TaintOf("dedicated", "infra", corev1.TaintEffectNoSchedule)} {
		if r.IntN(4) == 0 {
			n.Spec.Taints = append(n.Spec.Taints, t)
		}
	}
	return n
}

// randomDaemonSets judge the nodes by hostname, name, instance ID, pool and
// OS, with and without tolerations.
func randomDaemonSets(r *rand.Rand, names int) []*appsv1.DaemonSet {
	pick := func() string { return fmt.Sprintf("n-%03d", r.IntN(names+2)) }
	return []*appsv1.DaemonSet{
		testobj.DS(),
		testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux"})),
		testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelHostname: pick()})),
		testobj.DS(testobj.WithNodeName(pick()), testobj.WithTolerations(corev1.Toleration{Operator: corev1.TolerationOpExists})),
		testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, pick(), pick())))),
		testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpIn, pick(), "other-"+pick())),
			testobj.NodeTerm(testobj.NodeReq("pool", corev1.NodeSelectorOpIn, "p1")))),
		testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpExists),
			testobj.NodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux")))),
		testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq("example.com/instance-id", corev1.NodeSelectorOpDoesNotExist)))),
		testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq("example.com/instance-id", corev1.NodeSelectorOpIn,
			fmt.Sprintf("i-%d", r.IntN(1000)), fmt.Sprintf("i-%d", r.IntN(1000)))))),
		testobj.DS(testobj.WithRequiredNodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{pick(), pick()}}}}),
			testobj.WithTolerations(corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists})),
		testobj.DS(testobj.WithRequiredNodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpNotIn, Values: []string{pick()}}}})),
		testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq("example.com/instance-id", corev1.NodeSelectorOpGt, "500")))),
	}
}

func assertSameCoverage(t *testing.T, what string, got, want Coverage) {
	t.Helper()
	if !sameCoverage(got, want) {
		t.Fatalf("%s:\n got  %s\n want %s", what, describeCoverage(got), describeCoverage(want))
	}
	// The first names of a skip are the start of its whole list.
	for _, s := range got.Skips {
		all := s.Nodes()
		for _, n := range []int{0, 1, 2, 10, len(all) - 1, len(all), len(all) + 1} {
			if first := s.FirstNodes(n); !slices.Equal(first, all[:max(min(n, len(all)), 0)]) {
				t.Fatalf("%s: FirstNodes(%d) = %v, want the start of %v", what, n, first, all)
			}
		}
	}
}

// assertEligible checks EligibleNodes on a prediction's runs of classes
// against the reference's skips, which name their nodes.
func assertEligible(t *testing.T, what string, snap *NodeSnapshot, got, want Coverage) {
	t.Helper()
	if len(want.Skips) > 0 && want.Skips[0].runs != nil {
		t.Fatalf("%s: the reference's skips are runs", what)
	}
	g, w := EligibleNodes(&got, snap), EligibleNodes(&want, snap)
	if !slices.Equal(g, w) || len(g) != got.Eligible {
		t.Fatalf("%s: EligibleNodes = %v (%d, %d eligible), want %v", what, g, len(g), got.Eligible, w)
	}
}

// TestPredict_MatchesNodeByNode: classes, the per-node index and the
// stand-in for unnamed members give the same answer as judging every node.
func TestPredict_MatchesNodeByNode(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 1))
		var nodes []*corev1.Node
		for i := range 1 + r.IntN(300) {
			nodes = append(nodes, randomNode(r, i))
		}
		snap := NewNodeSnapshot(nodes)
		for i, ds := range randomDaemonSets(r, len(nodes)) {
			got, want := Predict(ds, snap), referenceCoverage(ds, nodes)
			assertSameCoverage(t, fmt.Sprintf("seed %d, DaemonSet %d", seed, i), got, want)
			assertEligible(t, fmt.Sprintf("seed %d, DaemonSet %d", seed, i), snap, got, want)
		}
	}
}

// TestNodeSet_ChangesMatchARebuild: after any sequence of adds, changes and
// deletes, the updated snapshot predicts what a fresh one does, and every
// snapshot handed out before stays as it was.
func TestNodeSet_ChangesMatchARebuild(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 2))
		live := map[string]*corev1.Node{}
		var initial []*corev1.Node
		for i := range r.IntN(200) {
			n := randomNode(r, i)
			initial = append(initial, n)
			live[n.Name] = n
		}
		set := NewNodeSet(initial)
		type held struct {
			snap  *NodeSnapshot
			nodes []*corev1.Node
		}
		var old []held
		for step := range 300 {
			i := r.IntN(260)
			name := fmt.Sprintf("n-%03d", i)
			if _, ok := live[name]; ok && r.IntN(3) == 0 {
				_, changed := set.Remove(name)
				if !changed {
					t.Fatalf("seed %d step %d: removing %s changed nothing", seed, step, name)
				}
				delete(live, name)
			} else {
				n := randomNode(r, i)
				prev, existed := live[name]
				held := set.Holds(n)
				_, _, changed := set.Apply(n)
				live[name] = n
				if existed && changed == (reflect.DeepEqual(prev.Labels, n.Labels) && slices.Equal(prev.Spec.Taints, n.Spec.Taints)) {
					t.Fatalf("seed %d step %d: Apply(%s) changed = %v", seed, step, name, changed)
				}
				if held == changed || !set.Holds(n) {
					t.Fatalf("seed %d step %d: Holds(%s) = %v before Apply (changed = %v), %v after", seed, step, name, held, changed, set.Holds(n))
				}
			}
			for _, name := range []string{name, fmt.Sprintf("n-%03d", r.IntN(260))} {
				got, want := set.Node(name), live[name]
				if (got == nil) != (want == nil) || got != nil && (got.Name != want.Name || !reflect.DeepEqual(got.Labels, want.Labels) ||
					!slices.Equal(got.Spec.Taints, want.Spec.Taints)) {
					t.Fatalf("seed %d step %d: Node(%s) = %+v, want %+v", seed, step, name, got, want)
				}
			}
			if step%50 == 0 {
				old = append(old, held{set.Snapshot(), nodeList(live)})
				assertIndexed(t, fmt.Sprintf("seed %d step %d", seed, step), set.Snapshot())
			}
		}
		nodes := nodeList(live)
		fresh := NewNodeSnapshot(nodes)
		if set.Snapshot().Len() != len(nodes) {
			t.Fatalf("seed %d: Len() = %d, want %d", seed, set.Snapshot().Len(), len(nodes))
		}
		if got := set.Snapshot().Names(); !slices.Equal(got, fresh.Names()) {
			t.Fatalf("seed %d: Names() = %v, want %v", seed, got, fresh.Names())
		}
		for i, ds := range randomDaemonSets(r, 260) {
			want := referenceCoverage(ds, nodes)
			updated := Predict(ds, set.Snapshot())
			assertSameCoverage(t, fmt.Sprintf("seed %d, DaemonSet %d, updated", seed, i), updated, want)
			assertEligible(t, fmt.Sprintf("seed %d, DaemonSet %d, updated", seed, i), set.Snapshot(), updated, want)
			assertSameCoverage(t, fmt.Sprintf("seed %d, DaemonSet %d, rebuilt", seed, i), Predict(ds, fresh), want)
			for k, h := range old {
				assertSameCoverage(t, fmt.Sprintf("seed %d, DaemonSet %d, snapshot %d held", seed, i, k),
					Predict(ds, h.snap), referenceCoverage(ds, h.nodes))
			}
		}
	}
}

// assertIndexed checks each class's per-node index: every member carrying a
// per-node key once, in value then name order.
func assertIndexed(t *testing.T, what string, snap *NodeSnapshot) {
	t.Helper()
	for _, c := range snap.classes {
		if len(c.values) != len(c.members)*len(snap.perNodeKeys) || len(c.byValue) != len(snap.perNodeKeys) {
			t.Fatalf("%s: class with %d members holds %d values and %d indices", what, len(c.members), len(c.values), len(c.byValue))
		}
		for j, idx := range c.byValue {
			var want []int32
			for i := range c.members {
				if c.valuesOf(i)[j].present {
					want = append(want, int32(i))
				}
			}
			slices.SortStableFunc(want, func(a, b int32) int { return cmpString(c.valuesOf(int(a))[j].value, c.valuesOf(int(b))[j].value) })
			if !slices.Equal(idx, want) {
				t.Fatalf("%s: index of key %s = %v, want %v", what, snap.perNodeKeys[j], idx, want)
			}
		}
	}
}

func nodeList(m map[string]*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(m))
	for _, n := range m {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return cmpString(a.Name, b.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
