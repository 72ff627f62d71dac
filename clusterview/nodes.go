package clusterview

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/dsguard/dsguard/coverage"
)

// NodeView keeps the current coverage.NodeSnapshot of the cluster's nodes. It
// applies each node change as the informer reports it, to the node's old and
// new class only (coverage.NodeSet), and ignores updates that change nothing a
// prediction reads: kubelet heartbeats, conditions and annotations, which are
// most Node updates, cost a comparison. The request path only loads a
// pointer; a replica that has not seen the nodes yet is not ready, so it never
// judges coverage on an empty cluster.
type NodeView struct {
	Cache cache.Cache
	Log   logr.Logger
	// Freshness says how old the view is (see Freshness).
	Freshness

	snapshot atomic.Pointer[coverage.NodeSnapshot]
	// mu orders changes: the informer delivers them from one goroutine,
	// but the first full build runs in Start.
	mu       sync.Mutex
	set      *coverage.NodeSet
	handlers []*func(NodeChange)
	// initial holds the nodes by name until the first build (see Start).
	initial map[string]*corev1.Node
}

// NodeChange is one node change, as the view applied it.
type NodeChange struct {
	// Old is the node before the change, nil when it was added; New is the
	// node after it, nil when it was deleted. Both are as the informer's
	// cache keeps them (stripped, see StripNode) and must not be modified.
	Old, New *corev1.Node
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica answers admission requests, so every replica keeps the view.
func (v *NodeView) NeedLeaderElection() bool { return false }

// Snapshot returns the current snapshot, or nil before the first sync.
func (v *NodeView) Snapshot() *coverage.NodeSnapshot { return v.snapshot.Load() }

// OnChange registers f to be called with every change the view applies, after
// the snapshot reflects it, in order, until the returned function is called.
// f runs on the informer's goroutine: it must return quickly (hand the change
// to a queue).
func (v *NodeView) OnChange(f func(NodeChange)) (remove func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	h := &f
	v.handlers = append(v.handlers, h)
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.handlers = slices.DeleteFunc(v.handlers, func(x *func(NodeChange)) bool { return x == h })
	}
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
	inf, err := v.Cache.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return fmt.Errorf("node informer: %w", err)
	}
	// One handler both applies the changes and counts every event as
	// contact (see Freshness): a Node update is the commonest event there
	// is, and each handler is a listener of its own with its own buffer.
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			v.heardEvent()
			if n, ok := obj.(*corev1.Node); ok {
				v.apply(nil, n)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			v.heardEvent()
			old, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && PredictionInputsChanged(old, n) {
				v.apply(old, n)
			}
		},
		DeleteFunc: func(obj any) {
			v.heardEvent()
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				v.apply(n, nil)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("node informer: %w", err)
	}
	// The first build takes the nodes of the informer's initial list as
	// its handler is handed them (apply collects them until then): the
	// cache's own objects, not the copies a List of the cache makes, which
	// at 65,000 nodes would double the view's memory while it is built.
	// Once the handler has seen the initial list, the build holds every
	// node; the changes after it are applied one by one.
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return ctx.Err()
	}
	v.mu.Lock()
	nodes := slices.SortedFunc(maps.Values(v.initial), func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	v.initial = nil
	v.set = coverage.NewNodeSet(nodes)
	snap := v.set.Snapshot()
	v.snapshot.Store(snap)
	v.mu.Unlock()
	v.Log.Info("node view built", "nodes", snap.Len(), "classes", snap.Classes())
	v.trackFreshness(ctx)
	<-ctx.Done()
	return nil
}

// apply applies one change once the first build is done; before it, it
// keeps the latest of each node for the build.
func (v *NodeView) apply(old, n *corev1.Node) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.set == nil {
		if v.initial == nil {
			v.initial = map[string]*corev1.Node{}
		}
		if n == nil {
			delete(v.initial, old.Name)
		} else {
			v.initial[n.Name] = n
		}
		return
	}
	var changed bool
	if n == nil {
		_, changed = v.set.Remove(old.Name)
	} else {
		_, _, changed = v.set.Apply(n)
	}
	if !changed {
		return
	}
	snap := v.set.Snapshot()
	v.snapshot.Store(snap)
	if log := v.Log.V(1); log.Enabled() {
		name := ""
		if n != nil {
			name = n.Name
		} else {
			name = old.Name
		}
		log.Info("node view updated", "node", name, "deleted", n == nil, "nodes", snap.Len(), "classes", snap.Classes())
	}
	for _, f := range v.handlers {
		(*f)(NodeChange{Old: old, New: n})
	}
}

// PredictionInputsChanged reports whether an update changed anything a
// coverage prediction reads: labels, taints or the cordon.
func PredictionInputsChanged(old, n *corev1.Node) bool {
	return old.Spec.Unschedulable != n.Spec.Unschedulable ||
		!maps.Equal(old.Labels, n.Labels) ||
		!slices.EqualFunc(old.Spec.Taints, n.Spec.Taints, func(a, b corev1.Taint) bool {
			// TimeAdded is when the node lifecycle controller added a
			// NoExecute taint: no part of a prediction.
			return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
		})
}

// StripNode is the node informer's cache transform (see coverage.StripNode).
func StripNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		return coverage.StripNode(n), nil
	}
	return obj, nil
}
