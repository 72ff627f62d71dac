package clusterview

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestDaemonSetSet_SortedAfterEveryChange(t *testing.T) {
	ds := func(ns, name, rv string) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}}
	}
	names := func(list []*appsv1.DaemonSet) []string {
		var out []string
		for _, d := range list {
			out = append(out, d.Namespace+"/"+d.Name+"@"+d.ResourceVersion)
		}
		return out
	}
	var s daemonSetSet
	if got := s.sorted(); got == nil || len(got) != 0 {
		t.Fatalf("an empty set lists %v, want an empty list", got)
	}
	before, was := s.sorted(), []string(nil)
	for _, step := range []struct {
		apply func()
		want  []string
	}{
		{func() { s.put(ds("b", "x", "1")); s.put(ds("a", "y", "1")); s.put(ds("a", "x", "1")) },
			[]string{"a/x@1", "a/y@1", "b/x@1"}},
		{func() { s.put(ds("a", "y", "2")) }, []string{"a/x@1", "a/y@2", "b/x@1"}},
		{func() { s.put(ds("a", "z", "1")); s.put(ds("0", "z", "1")); s.put(ds("c", "a", "1")) },
			[]string{"0/z@1", "a/x@1", "a/y@2", "a/z@1", "b/x@1", "c/a@1"}},
		{func() {
			s.remove(ds("0", "z", "1"))
			s.remove(ds("c", "a", "1"))
			s.remove(ds("a", "z", "1"))
			s.remove(ds("q", "q", "1"))
		},
			[]string{"a/x@1", "a/y@2", "b/x@1"}},
		{func() { s.remove(ds("a", "x", "1")) }, []string{"a/y@2", "b/x@1"}},
		{func() { s.remove(toolscache.DeletedFinalStateUnknown{Key: "b/x", Obj: ds("b", "x", "1")}) }, []string{"a/y@2"}},
		{func() { s.put("not a DaemonSet"); s.remove(42) }, []string{"a/y@2"}},
	} {
		step.apply()
		if got := names(before); !slices.Equal(got, was) {
			t.Fatalf("a list handed out before the change now lists %v, was %v", got, was)
		}
		first := s.sorted()
		if got := names(first); !slices.Equal(got, step.want) {
			t.Fatalf("listed %v, want %v", got, step.want)
		}
		if again := s.sorted(); &again[0] != &first[0] {
			t.Errorf("a second list without a change was made anew")
		}
		before, was = first, names(first)
	}
}
