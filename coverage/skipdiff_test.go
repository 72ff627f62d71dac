package coverage

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/internal/testobj"
)

// namesOf returns the sorted names of skips, the plain way.
func namesOf(skips []Skip) []string {
	var out []string
	for _, s := range skips {
		out = append(out, s.Nodes()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestNewlySkipped_MatchesTheNamesDifference: for random fleets changed node
// by node, and random DaemonSets predicted before and after each batch of
// changes, NewlySkipped counts and names exactly the names in the later
// prediction's skips and not in the earlier one's, each with the skip that
// names it, whether the runs are shared between the two snapshots or not.
func TestNewlySkipped_MatchesTheNamesDifference(t *testing.T) {
	for seed := range uint64(15) {
		r := rand.New(rand.NewPCG(seed, 7))
		set := NewNodeSet(nil)
		for i := range 150 + r.IntN(100) {
			set.Apply(randomNode(r, i))
		}
		dss := randomDaemonSets(r, 250)
		for batch := range 12 {
			before := set.Snapshot()
			for range r.IntN(4) {
				i := r.IntN(260)
				if r.IntN(3) == 0 {
					set.Remove(fmt.Sprintf("n-%03d", i))
				} else {
					set.Apply(randomNode(r, i))
				}
			}
			after := set.Snapshot()
			for d, ds := range dss {
				old, cur := Predict(ds, before), Predict(ds, after)
				for _, pick := range []func(Coverage) []Skip{func(c Coverage) []Skip { return c.Gaps() }, func(c Coverage) []Skip { return c.Skips }} {
					was, now := pick(old), pick(cur)
					var want []string
					wasNames := namesOf(was)
					for _, n := range namesOf(now) {
						if _, ok := slices.BinarySearch(wasNames, n); !ok {
							want = append(want, n)
						}
					}
					count, first := NewlySkipped(was, now, 5)
					var got []string
					for _, f := range first {
						got = append(got, f.Name)
						if !slices.Contains(now[f.Skip].Nodes(), f.Name) {
							t.Fatalf("seed %d batch %d ds %d: %s attributed to a skip that does not name it", seed, batch, d, f.Name)
						}
					}
					if count != len(want) || !reflect.DeepEqual(got, want[:min(5, len(want))]) {
						t.Fatalf("seed %d batch %d ds %d: NewlySkipped = %d %v, want %d %v", seed, batch, d, count, got, len(want), want[:min(5, len(want))])
					}
					if c, _ := NewlySkipped(now, now, 5); c != 0 {
						t.Fatalf("seed %d batch %d ds %d: a prediction has %d nodes newly skipped against itself", seed, batch, d, c)
					}
				}
			}
		}
	}
}

func TestNewlySkipped_NamedSkips(t *testing.T) {
	taintInfra := testobj.TaintOf("dedicated", "infra", corev1.TaintEffectNoSchedule)
	infra := skipTaint(taintInfra, "infra-2", "infra-1")
	gpu := skipTaint(testobj.NoSchedule("gpu"), "gpu-1")
	count, first := NewlySkipped([]Skip{skipTaint(taintInfra, "infra-1")}, []Skip{infra, gpu}, 1)
	if count != 2 || !reflect.DeepEqual(first, []NewSkip{{Name: "gpu-1", Skip: 1}}) {
		t.Errorf("NewlySkipped = %d %v, want 2 [gpu-1 from skip 1]", count, first)
	}
	if count, first := NewlySkipped([]Skip{infra, gpu}, []Skip{infra}, 10); count != 0 || first != nil {
		t.Errorf("fewer skipped nodes: NewlySkipped = %d %v, want none", count, first)
	}
}
