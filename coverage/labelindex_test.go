package coverage

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/internal/testobj"
)

// The vocabulary of the random fleets and selectors below: few values, so
// that selectors hit, miss and overlap.
var (
	indexLabels = map[string][]string{
		"pool":                   {"general", "gpu", "infra"},
		corev1.LabelTopologyZone: {"a", "b"},
		corev1.LabelOSStable:     {"linux", "windows"},
		corev1.LabelArchStable:   {"amd64", "arm64"},
		"beta.kubernetes.io/os":  {"linux", "windows"},
		"dedicated":              {"", "true"},
	}
	indexTaints = []corev1.Taint{
		testobj.NoSchedule("dedicated"),
		testobj.TaintOf("dedicated", "gpu", corev1.TaintEffectNoSchedule),
		testobj.TaintOf("dedicated", "infra", corev1.TaintEffectNoSchedule),
		testobj.TaintOf("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule),
		testobj.NoExecute("evict"),
		testobj.TaintOf("soft", "", corev1.TaintEffectPreferNoSchedule),
		testobj.NoSchedule(corev1.TaintNodeNotReady),
		testobj.NoSchedule(corev1.TaintNodeUnschedulable),
	}
	indexTolerations = []corev1.Toleration{
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists},
		{Key: "dedicated", Operator: corev1.TolerationOpExists},
		{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule},
		{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "absent"},
		{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	}
)

func randomIndexNode(r *rand.Rand, name string) *corev1.Node {
	n := testobj.Node(name)
	n.Labels = map[string]string{corev1.LabelHostname: name}
	// In a fixed order, so that the seed alone decides the fleet.
	for _, k := range slices.Sorted(maps.Keys(indexLabels)) {
		vs := indexLabels[k]
		if r.IntN(5) > 0 {
			n.Labels[k] = vs[r.IntN(len(vs))]
		}
	}
	for _, t := range indexTaints {
		if r.IntN(6) == 0 {
			n.Spec.Taints = append(n.Spec.Taints, t)
		}
	}
	if r.IntN(8) == 0 {
		// As a NoExecute taint carries it: a time of its own, which two
		// nodes of one class may not share.
		added := metav1.NewTime(time.Unix(int64(r.IntN(3)), 0))
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "maintenance",
			Effect: corev1.TaintEffectNoExecute, TimeAdded: &added})
	}
	n.Spec.Unschedulable = r.IntN(10) == 0
	return n
}

func randomSelector(r *rand.Rand) map[string]string {
	if r.IntN(6) == 0 {
		return nil
	}
	sel := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(indexLabels)) {
		vs := indexLabels[k]
		switch r.IntN(4) {
		case 0:
			sel[k] = vs[r.IntN(len(vs))]
		case 1:
			if r.IntN(4) == 0 {
				sel[k] = "nowhere" // a value no node has
			}
		}
	}
	return sel
}

// TestPredictBySelector_MatchesByClass checks the label index against
// judging each class on its own node, on random fleets and nodeSelectors,
// for snapshots built whole and for snapshots a NodeSet keeps after changes:
// the same eligible count and the same skip groups, in the same order.
func TestPredictBySelector_MatchesByClass(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	compared, selectedSome, skippedSome, taintSkips := 0, 0, 0, 0
	for fleet := range 40 {
		var nodes []*corev1.Node
		for i := range 5 + r.IntN(80) {
			nodes = append(nodes, randomIndexNode(r, fmt.Sprintf("f%d-n%03d", fleet, i)))
		}
		set := NewNodeSet(nodes)
		for round := range 4 {
			snaps := map[string]*NodeSnapshot{"whole": NewNodeSnapshot(nodes), "kept": set.Snapshot()}
			for range 25 {
				ds := testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(randomSelector(r)))
				spec := &ds.Spec.Template.Spec
				for _, tol := range indexTolerations {
					if r.IntN(3) == 0 {
						spec.Tolerations = append(spec.Tolerations, tol)
					}
				}
				spec.HostNetwork = r.IntN(4) == 0
				for name, snap := range snaps {
					fast := predictor{spec: spec, tolerations: daemonTolerations(spec)}
					slow := predictor{spec: spec, tolerations: daemonTolerations(spec)}
					a := Coverage{Total: snap.Len(), Eligible: fast.bySelector(snap), Skips: fast.groups}
					b := Coverage{Total: snap.Len(), Eligible: slow.byClass(snap), Skips: slow.groups}
					if !sameCoverage(a, b) {
						t.Fatalf("fleet %d round %d (%s snapshot), nodeSelector %v, tolerations %v:\nby selector: %s\nby class: %s",
							fleet, round, name, spec.NodeSelector, spec.Tolerations, describeCoverage(a), describeCoverage(b))
					}
					compared++
					if a.Eligible > 0 {
						selectedSome++
					}
					if len(a.Skips) > 0 {
						skippedSome++
					}
					if a.Skipped(SkipTaint) > 0 {
						taintSkips++
					}
				}
			}
			// Change some nodes, add one and remove one, as the informer
			// would, for the next round's snapshots.
			for range 3 {
				i := r.IntN(len(nodes))
				nodes[i] = randomIndexNode(r, nodes[i].Name)
				set.Apply(nodes[i])
			}
			added := randomIndexNode(r, fmt.Sprintf("f%d-added-%d", fleet, round))
			nodes = append(nodes, added)
			set.Apply(added)
			gone := r.IntN(len(nodes))
			set.Remove(nodes[gone].Name)
			nodes = append(nodes[:gone], nodes[gone+1:]...)
		}
	}
	// The random cases must exercise both outcomes, or the comparison
	// proves little.
	if selectedSome < compared/4 || skippedSome < compared/4 || taintSkips < compared/4 {
		t.Fatalf("%d comparisons, %d selecting some node, %d skipping some, %d for a taint: the random cases are lopsided",
			compared, selectedSome, skippedSome, taintSkips)
	}
	t.Logf("%d comparisons, %d selecting some node, %d skipping some, %d for a taint", compared, selectedSome, skippedSome, taintSkips)
}

// TestPredict_ManyTaintGroups checks the index of skip groups that a
// prediction keeps past groupIndexFrom against the linear search it
// replaces: a fleet whose classes carry taints of their own by the hundred.
func TestPredict_ManyTaintGroups(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 400 {
		// An owner's nodes fall into several pools: one taint, several
		// classes, so a group is looked up again past the index's start.
		n := testobj.Node(fmt.Sprintf("n-%03d", i), testobj.NodeLabels("pool", fmt.Sprint(i%7)))
		n.Spec.Taints = []corev1.Taint{testobj.TaintOf("owner", fmt.Sprint(i%150), corev1.TaintEffectNoSchedule)}
		if i%11 == 0 {
			n.Spec.Taints = nil
		}
		nodes = append(nodes, n)
	}
	snap := NewNodeSnapshot(nodes)
	for _, ds := range []*appsv1.DaemonSet{
		testobj.DS(testobj.WithTolerations()),
		testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{"pool": "1"})),
		testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq("pool", corev1.NodeSelectorOpNotIn, "2")))),
		testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, "n-001", "n-002")))),
	} {
		indexed := Predict(ds, snap)
		saved := groupIndexFrom
		groupIndexFrom = 1 << 30
		linear := Predict(ds, snap)
		groupIndexFrom = saved
		if len(indexed.Skips) <= groupIndexFrom {
			t.Fatalf("%d skip groups: the index was not used", len(indexed.Skips))
		}
		if !sameCoverage(indexed, linear) {
			t.Errorf("indexed: %s\nlinear: %s", describeCoverage(indexed), describeCoverage(linear))
		}
	}
}

// TestTaintString checks the one-allocation rendering of a taint against
// the API's own (corev1.Taint.ToString), which warnings used to print.
func TestTaintString(t *testing.T) {
	for _, taint := range append([]corev1.Taint{
		{Key: "k", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/k", Value: "v=1", Effect: corev1.TaintEffectNoExecute},
		{Key: "k", Value: "v"},
		{},
	}, indexTaints...) {
		if got, want := taintString(&taint), taint.ToString(); got != want {
			t.Errorf("taintString(%+v) = %q, want %q", taint, got, want)
		}
	}
}
