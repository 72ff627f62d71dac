package clusterview

import (
	"cmp"
	"context"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DaemonSetLister lists the DaemonSets of a manager's cache for the rules
// that compare agents. It keeps the informer's objects by key as its
// events arrive and sorts them again only after one changed: an admission
// request or an audit then costs a lookup, not a copy of every DaemonSet
// (hundreds, each audited in turn, and audited again on every create while
// DaemonSets come and go). The list is shared and only read.
type DaemonSetLister struct {
	cache cache.Cache
	// synced reports whether the handler has been handed the informer's
	// first list; until then List reads the cache.
	synced func() bool
	set    daemonSetSet
}

// NewDaemonSetLister registers the DaemonSet informer with c (before the
// manager starts, so that every replica has it synced before it is ready)
// and keeps its objects.
func NewDaemonSetLister(ctx context.Context, c cache.Cache) (*DaemonSetLister, error) {
	inf, err := c.GetInformer(ctx, &appsv1.DaemonSet{})
	if err != nil {
		return nil, err
	}
	l := &DaemonSetLister{cache: c}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    l.set.put,
		UpdateFunc: func(_, o any) { l.set.put(o) },
		DeleteFunc: l.set.remove,
	})
	if err != nil {
		return nil, err
	}
	l.synced = reg.HasSynced
	return l, nil
}

// List returns the cached DaemonSets sorted by namespace and name: the
// rules that name other DaemonSets name them in that order.
func (l *DaemonSetLister) List(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	if l.synced() {
		return l.set.sorted(), nil
	}
	var list appsv1.DaemonSetList
	if err := l.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*appsv1.DaemonSet, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	slices.SortFunc(out, compareDaemonSets)
	return out, nil
}

// compareDaemonSets orders DaemonSets by namespace, then name.
func compareDaemonSets(a, b *appsv1.DaemonSet) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// daemonSetSet holds DaemonSets by key and hands out a sorted list, kept
// sorted through changes.
type daemonSetSet struct {
	mu    sync.Mutex
	byKey map[types.NamespacedName]*appsv1.DaemonSet
	// list is byKey sorted, nil until a reader asks for it; a change
	// makes a new one (edit).
	list []*appsv1.DaemonSet
}

func (s *daemonSetSet) put(obj any) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[types.NamespacedName]*appsv1.DaemonSet{}
	}
	s.byKey[types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}] = ds
	s.edit(ds, false)
}

func (s *daemonSetSet) remove(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byKey, types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name})
	s.edit(ds, true)
}

// edit applies one change to the sorted list, when one is made, as a new
// list: the old one may be in a reader's hands. Under DaemonSet churn (each
// status update is a change) sorting again for the next reader compared
// strings n log n times; a copy of n pointers is cheaper. mu is held.
func (s *daemonSetSet) edit(ds *appsv1.DaemonSet, remove bool) {
	if s.list == nil {
		return
	}
	i, found := slices.BinarySearchFunc(s.list, ds, compareDaemonSets)
	switch {
	case remove && found:
		s.list = slices.Concat(s.list[:i], s.list[i+1:])
	case remove:
	case found:
		s.list = slices.Clone(s.list)
		s.list[i] = ds
	default:
		s.list = slices.Concat(s.list[:i], []*appsv1.DaemonSet{ds}, s.list[i:])
	}
}

// sorted returns the DaemonSets sorted by namespace and name; never nil.
func (s *daemonSetSet) sorted() []*appsv1.DaemonSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.list == nil {
		s.list = make([]*appsv1.DaemonSet, 0, len(s.byKey))
		for _, ds := range s.byKey {
			s.list = append(s.list, ds)
		}
		slices.SortFunc(s.list, compareDaemonSets)
	}
	return s.list
}
