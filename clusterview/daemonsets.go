package clusterview

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DaemonSetLister lists the DaemonSets of a manager's cache for the rules
// that compare agents, and lists again only after one changed: an
// admission request or an audit then costs a lookup, not a copy of every
// DaemonSet (hundreds, each audited in turn). The list is shared and only
// read.
type DaemonSetLister struct {
	cache cache.Cache
	// changes counts the informer's events; listedAt is its value when
	// list was made.
	changes  atomic.Uint64
	mu       sync.Mutex
	listedAt uint64
	list     []*appsv1.DaemonSet
}

// NewDaemonSetLister registers the DaemonSet informer with c (before the
// manager starts, so that every replica has it synced before it is ready)
// and counts its events.
func NewDaemonSetLister(ctx context.Context, c cache.Cache) (*DaemonSetLister, error) {
	inf, err := c.GetInformer(ctx, &appsv1.DaemonSet{})
	if err != nil {
		return nil, err
	}
	l := &DaemonSetLister{cache: c}
	changed := func(any) { l.changes.Add(1) }
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: changed, DeleteFunc: changed, UpdateFunc: func(_, o any) { changed(o) },
	}); err != nil {
		return nil, err
	}
	l.changes.Add(1)
	return l, nil
}

// List returns the cached DaemonSets sorted by namespace and name, listing
// them again when one changed since the last list: the rules that name
// other DaemonSets name them in that order, and sorting once here spares
// every audit its own sort.
func (l *DaemonSetLister) List(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	at := l.changes.Load()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.list != nil && l.listedAt == at {
		return l.list, nil
	}
	var list appsv1.DaemonSetList
	if err := l.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*appsv1.DaemonSet, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	slices.SortFunc(out, func(a, b *appsv1.DaemonSet) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	l.list, l.listedAt = out, at
	return out, nil
}
