package clusterview

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/coverage"
)

// NodeView keeps a precomputed coverage.NodeSnapshot of the cluster's nodes,
// rebuilt shortly after any node changes. The request path only loads a
// pointer; a replica that has not seen the nodes yet is not ready, so it never
// judges coverage on an empty cluster.
type NodeView struct {
	Cache cache.Cache
	Log   logr.Logger
	// Debounce batches bursts of node events (a node pool scaling up) into
	// one rebuild.
	Debounce time.Duration

	snapshot atomic.Pointer[coverage.NodeSnapshot]
	mu       sync.Mutex
	subs     []chan struct{}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica answers admission requests, so every replica keeps the view.
func (v *NodeView) NeedLeaderElection() bool { return false }

// Snapshot returns the current snapshot, or nil before the first sync.
func (v *NodeView) Snapshot() *coverage.NodeSnapshot { return v.snapshot.Load() }

// Subscribe returns a channel that receives a value after every rebuild.
// Sends never block: a slow reader sees one pending notification.
func (v *NodeView) Subscribe() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	ch := make(chan struct{}, 1)
	v.subs = append(v.subs, ch)
	return ch
}

// ReadyCheck is a healthz checker: ready once the nodes have been seen.
func (v *NodeView) ReadyCheck(_ *http.Request) error {
	if v.snapshot.Load() == nil {
		return errors.New("node informer not synced yet")
	}
	return nil
}

// Start implements manager.Runnable.
func (v *NodeView) Start(ctx context.Context) error {
	changed, err := WatchChanges(ctx, v.Cache, &corev1.Node{})
	if err != nil {
		return fmt.Errorf("node informer: %w", err)
	}
	if !v.Cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	if err := v.rebuild(ctx); err != nil {
		return err
	}
	debounce := v.Debounce
	if debounce == 0 {
		debounce = 100 * time.Millisecond
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		// Let a burst settle, then rebuild once.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(debounce):
		}
		if err := v.rebuild(ctx); err != nil {
			v.Log.Error(err, "rebuilding the node view")
		}
	}
}

func (v *NodeView) rebuild(ctx context.Context) error {
	var list corev1.NodeList
	if err := v.Cache.List(ctx, &list); err != nil {
		return err
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	snap := coverage.NewNodeSnapshot(nodes)
	v.snapshot.Store(snap)
	v.Log.V(1).Info("node view rebuilt", "nodes", snap.Len(), "classes", snap.Classes())
	v.mu.Lock()
	for _, ch := range v.subs {
		notify(ch)
	}
	v.mu.Unlock()
	return nil
}

// WatchChanges returns a channel that receives a value whenever an object of
// obj's kind is added, updated or deleted in c. Events coalesce: the reader
// rebuilds from the cache, so it needs to know "something changed", not what.
func WatchChanges(ctx context.Context, c cache.Cache, obj client.Object) (<-chan struct{}, error) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	changed := make(chan struct{}, 1)
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify(changed) },
		UpdateFunc: func(_, _ any) { notify(changed) },
		DeleteFunc: func(any) { notify(changed) },
	})
	return changed, err
}

// notify sends without blocking; one pending notification is enough.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// StripNode is the node informer's cache transform (see coverage.StripNode).
func StripNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		return coverage.StripNode(n), nil
	}
	return obj, nil
}
