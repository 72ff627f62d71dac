package clusterview

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/dsguard/dsguard/coverage"
)

// NodeView keeps the current coverage.NodeSnapshot of the cluster's nodes. A
// reflector of its own lists and watches the Nodes and hands each one to the
// view, which applies it to a coverage.NodeSet and keeps no Node object: the
// set holds the names, labels and taints a prediction reads, grouped into
// classes, and nothing else (an informer cache would hold every node a
// second time, about 1.7 KB each even stripped). A change is applied to the
// node's old and new class only; an update that changes nothing a prediction
// reads (kubelet heartbeats, conditions, annotations: most Node updates) is
// compared with what the set holds and dropped. The request path only loads a
// pointer; a replica that has not listed the nodes yet is not ready, so it
// never judges coverage on an empty cluster.
type NodeView struct {
	// Nodes lists and watches the cluster's Nodes (NodeListerWatcher).
	Nodes toolscache.ListerWatcher
	Log   logr.Logger
	// Freshness says how old the view is (see Freshness).
	Freshness

	snapshot atomic.Pointer[coverage.NodeSnapshot]
	// mu orders changes: the reflector delivers them from one goroutine,
	// handlers are added from others.
	mu       sync.Mutex
	set      *coverage.NodeSet // nil until the first list
	handlers []*func(NodeChange)
	// built is closed once the first list has been applied.
	built     chan struct{}
	buildOnce sync.Once
}

// NodeChange is one node change, as the view applied it.
type NodeChange struct {
	// Old is the node before the change, nil when it was added; New is the
	// node after it, nil when it was deleted. The view keeps no Node
	// objects: both are rebuilt from its node set and carry what a
	// prediction reads (name, labels and taints; no status, annotations,
	// UID or resourceVersion). They belong to the handler.
	Old, New *corev1.Node
}

// NodeClientConfig is cfg as the node view's client uses it: Nodes in
// protobuf, as Kubernetes' own controllers read them (a list of tens of
// thousands costs less to decode than in JSON). Compression stays as cfg
// has it (`dsguard serve` turns it off).
func NodeClientConfig(cfg *rest.Config) *rest.Config {
	c := rest.AddUserAgent(rest.CopyConfig(cfg), "dsguard-nodes")
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// NodeListerWatcher lists and watches the cluster's Nodes with client
// (which needs list and watch of nodes, nothing more).
func NodeListerWatcher(client kubernetes.Interface) toolscache.ListerWatcher {
	nodes := client.CoreV1().Nodes()
	return toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return nodes.Watch(ctx, opts)
		},
	}, client)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica answers admission requests, so every replica keeps the view.
func (v *NodeView) NeedLeaderElection() bool { return false }

// Snapshot returns the current snapshot, or nil before the first list.
func (v *NodeView) Snapshot() *coverage.NodeSnapshot { return v.snapshot.Load() }

// OnChange registers f to be called with every change the view applies, after
// the snapshot reflects it, in order, until the returned function is called.
// f runs on the reflector's goroutine: it must return quickly (hand the
// change to a queue).
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

// ReadyCheck is a healthz checker: ready once the nodes have been listed.
func (v *NodeView) ReadyCheck(_ *http.Request) error {
	if v.snapshot.Load() == nil {
		return errors.New("the nodes have not been listed yet")
	}
	return nil
}

// The reflector's backoff between failed lists and watches, as client-go's
// reflector sets it: from 0.8 s doubling up to 30 s, reset every 2 minutes.
var nodeBackoff = wait.Backoff{Duration: 800 * time.Millisecond, Cap: 30 * time.Second,
	Steps: int(math.Ceil(30 / 0.8)), Factor: 2, Jitter: 1}

const nodeBackoffReset = 2 * time.Minute

// Start implements manager.Runnable: it runs the reflector until ctx ends.
func (v *NodeView) Start(ctx context.Context) error {
	if v.Nodes == nil {
		return errors.New("node view: no lister-watcher of Nodes")
	}
	built := v.builtChan()
	r := toolscache.NewReflectorWithOptions(v.Nodes, &corev1.Node{}, nodeStore{v}, toolscache.ReflectorOptions{Name: "nodes"})
	var wg sync.WaitGroup
	wg.Go(func() { runReflector(ctx, r, v.watchError) })
	defer wg.Wait()
	select {
	case <-ctx.Done():
		return nil
	case <-built:
	}
	v.trackFreshness(ctx)
	<-ctx.Done()
	return nil
}

// runReflector is the loop of Reflector.RunWithContext with an error
// handler of the caller's: a reflector takes one only through an informer.
func runReflector(ctx context.Context, r *toolscache.Reflector,
	onError func(context.Context, *toolscache.Reflector, error)) {
	_ = nodeBackoff.DelayWithReset(clock.RealClock{}, nodeBackoffReset).Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		if err := r.ListAndWatchWithContext(ctx); err != nil {
			onError(ctx, r, err)
		}
		return false, nil
	})
}

// Built returns a channel closed once the first list of nodes is applied.
func (v *NodeView) Built() <-chan struct{} { return v.builtChan() }

// builtChan returns the channel closed once the first list is applied.
func (v *NodeView) builtChan() chan struct{} {
	v.buildOnce.Do(func() { v.built = make(chan struct{}) })
	return v.built
}

// nodeStore is the reflector's store: it applies what the reflector hands
// over to the view's node set and keeps nothing else.
type nodeStore struct{ v *NodeView }

func nodeOf(obj any) (*corev1.Node, error) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("node view: %T is not a Node", obj)
	}
	return n, nil
}

// Add implements toolscache.ReflectorStore.
func (s nodeStore) Add(obj any) error { return s.Update(obj) }

// Update implements toolscache.ReflectorStore.
func (s nodeStore) Update(obj any) error { return s.event(obj, s.v.apply) }

// Delete implements toolscache.ReflectorStore.
func (s nodeStore) Delete(obj any) error {
	return s.event(obj, func(n *corev1.Node) { s.v.remove(n.Name) })
}

// event counts one node event as contact and applies it under mu.
func (s nodeStore) event(obj any, change func(*corev1.Node)) error {
	s.v.heardEvent()
	n, err := nodeOf(obj)
	if err != nil {
		return err
	}
	s.v.mu.Lock()
	defer s.v.mu.Unlock()
	change(n)
	return nil
}

// Replace implements toolscache.ReflectorStore: the first list builds the
// set from the listed nodes themselves; a relist (after a watch expired or
// failed) applies what differs from the set, so that the snapshot and the
// handlers see exactly the changes missed meanwhile.
func (s nodeStore) Replace(list []any, _ string) error {
	s.v.heardEvent()
	nodes := make([]*corev1.Node, 0, len(list))
	for _, obj := range list {
		n, err := nodeOf(obj)
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	v := s.v
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.set == nil {
		v.set = coverage.NewNodeSet(nodes)
		snap := v.set.Snapshot()
		v.snapshot.Store(snap)
		v.Log.Info("node view built", "nodes", snap.Len(), "classes", snap.Classes())
		close(v.builtChan())
		return nil
	}
	listed := make(map[string]struct{}, len(nodes))
	for _, n := range nodes {
		listed[n.Name] = struct{}{}
		v.apply(n)
	}
	for _, name := range v.set.Snapshot().Names() {
		if _, ok := listed[name]; !ok {
			v.remove(name)
		}
	}
	return nil
}

// Resync implements toolscache.ReflectorStore: there is nothing to resync.
func (s nodeStore) Resync() error { return nil }

// Transformer implements toolscache.TransformingStore: a streamed list
// collects every node in a store of the reflector's own before Replace,
// which then holds only what the view reads.
func (s nodeStore) Transformer() toolscache.TransformFunc { return stripNode }

// stripNode is coverage.StripNode as a TransformFunc.
func stripNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		return coverage.StripNode(n), nil
	}
	return obj, nil
}

// apply adds or updates n; mu is held. An update that changes nothing a
// prediction reads costs the comparison (NodeSet.Holds) and publishes
// nothing. Before the first list there is nothing to apply to: the
// reflector always lists first, and that list replaces everything.
func (v *NodeView) apply(n *corev1.Node) {
	if v.set == nil || v.set.Holds(n) {
		return
	}
	old := v.set.Node(n.Name)
	if _, _, changed := v.set.Apply(n); changed {
		v.publish(NodeChange{Old: old, New: v.set.Node(n.Name)})
	}
}

// remove deletes the node named name; mu is held.
func (v *NodeView) remove(name string) {
	if v.set == nil {
		return
	}
	old := v.set.Node(name)
	if _, changed := v.set.Remove(name); changed {
		v.publish(NodeChange{Old: old})
	}
}

// publish stores the set's snapshot and tells the handlers; mu is held.
func (v *NodeView) publish(c NodeChange) {
	snap := v.set.Snapshot()
	v.snapshot.Store(snap)
	if log := v.Log.V(1); log.Enabled() {
		name := ""
		if c.New != nil {
			name = c.New.Name
		} else {
			name = c.Old.Name
		}
		log.Info("node view updated", "node", name, "deleted", c.New == nil, "nodes", snap.Len(), "classes", snap.Classes())
	}
	for _, f := range v.handlers {
		(*f)(c)
	}
}
