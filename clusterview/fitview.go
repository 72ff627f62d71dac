package clusterview

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unique"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/dsguard/dsguard/coverage/fit"
)

// FitView keeps what kube-scheduler weighs on each node, as a fit.Cluster:
// the nodes' allocatable, a compact record of every Pod bound to or
// nominated for a node (requests, priority, start time, host ports, labels,
// required anti-affinity terms), the PriorityClasses and the namespaces'
// labels. Four reflectors of its own feed it, each with a store that keeps
// no object: a Pod becomes its fit.Pod record as it arrives (a streamed
// list hands the reflector's own store the record, not the Pod), and an
// update that changes nothing of the record (most Pod updates are status
// reports) is compared and dropped.
//
// Cluster assembles the current fit.Cluster when something changed since
// the last one, rebuilding only the nodes whose Pods changed; the Cluster
// it returns is never written again, so requests read it without a lock.
type FitView struct {
	// Nodes, Pods, PriorityClasses and Namespaces list and watch the
	// cluster's objects (FitListerWatchers).
	Nodes, Pods, PriorityClasses, Namespaces toolscache.ListerWatcher
	Log                                      logr.Logger
	// After, when set, holds the first lists back until it is closed
	// (dsguard serve passes NodeView.Built): the lists of 65,000 Nodes
	// and the Pods are the largest a start makes, and one after the
	// other they do not hold their pages in memory at once.
	After <-chan struct{}

	mu    sync.Mutex
	nodes map[string]*fitNode
	pods  map[string]podPlace // by namespace/name
	// podLabels shares one map among the Pods whose labels are the same
	// (the replicas of a workload).
	podLabels  labelTable
	classes    map[string]schedulingv1.PriorityClass
	namespaces map[string]map[string]string
	labels     labelTable
	// order is the names of the nodes with a Node object, sorted; nil
	// when membership changed since the last Cluster.
	order []string
	// dirty are the nodes whose published form is out of date; changed
	// is set by any change since the last Cluster.
	dirty    map[string]struct{}
	changed  bool
	snapshot *fit.Cluster
	// listed counts the sources whose first list has been applied.
	listed    map[string]bool
	built     chan struct{}
	buildOnce sync.Once
}

// fitNode is one node as the view keeps it.
type fitNode struct {
	// base is the node without Pods (name, labels, allocatable); nil while
	// Pods are bound to a node whose Node object is not (or no longer)
	// there: the scheduler drops those, and so does Cluster.
	base *fit.Node
	// labels is the key of base's interned labels (see labelTable).
	labels unique.Handle[string]
	// name is the node's name, shared by the places of its Pods.
	name string
	// bound and nominated are the node's Pod records, most important
	// first. A Cluster may hold them: a change makes new slices (of the
	// node's ten to a hundred Pods) instead of writing these.
	bound, nominated []fit.Pod
	// published is the node with its Pods as the last Cluster holds it.
	published *fit.Node
}

// podPlace is where a Pod's record is kept.
type podPlace struct {
	node      *fitNode
	nominated bool
	// digest is the fit.Digest of the version the record was made from
	// (or found the same as): an update with the same digest changes
	// nothing, and its record is not made.
	digest uint64
	// labels is the key of the record's interned labels.
	labels unique.Handle[string]
}

// records returns the node's bound or nominated records.
func (n *fitNode) records(nominated bool) *[]fit.Pod {
	if nominated {
		return &n.nominated
	}
	return &n.bound
}

// fitSources are the names of the view's reflectors.
var fitSources = []string{"nodes", "pods", "priorityclasses", "namespaces"}

// PodsFieldSelector leaves out Pods that have finished, as kube-scheduler's
// own Pod informer does: they hold nothing on their node.
var PodsFieldSelector = fields.ParseSelectorOrDie("status.phase!=" + string(corev1.PodSucceeded) +
	",status.phase!=" + string(corev1.PodFailed)).String()

// FitListerWatchers returns the lister-watchers a FitView reads with
// client, which needs list and watch of nodes, pods, priorityclasses and
// namespaces.
func FitListerWatchers(client kubernetes.Interface) (nodes, pods, classes, namespaces toolscache.ListerWatcher) {
	core, sched := client.CoreV1(), client.SchedulingV1()
	podsLW := listWatch(client, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.FieldSelector = PodsFieldSelector
		return core.Pods(metav1.NamespaceAll).List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = PodsFieldSelector
		return core.Pods(metav1.NamespaceAll).Watch(ctx, o)
	})
	classesLW := listWatch(client, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return sched.PriorityClasses().List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return sched.PriorityClasses().Watch(ctx, o)
	})
	namespacesLW := listWatch(client, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return core.Namespaces().List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return core.Namespaces().Watch(ctx, o)
	})
	return NodeListerWatcher(client), podsLW, classesLW, namespacesLW
}

// listWatch is a lister-watcher from two functions, streaming its lists
// where the API server can (watch-list semantics, as NodeListerWatcher).
func listWatch(client kubernetes.Interface, list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)) toolscache.ListerWatcher {
	return toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: list, WatchFuncWithContext: watchFunc,
	}, client)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica answers admission requests, so every replica keeps the view.
func (v *FitView) NeedLeaderElection() bool { return false }

// Collectors are the view's gauges: the Pod records and the nodes it holds.
func (v *FitView) Collectors() []prometheus.Collector {
	count := func(f func() int) func() float64 {
		return func() float64 {
			v.mu.Lock()
			defer v.mu.Unlock()
			return float64(f())
		}
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dsguard_fit_pods",
			Help: "Pods bound to or nominated for a node that the fit view holds a record of."},
			count(func() int { return len(v.pods) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dsguard_fit_nodes",
			Help: "Nodes the fit view knows the allocatable of."},
			count(func() int {
				n := 0
				for _, fn := range v.nodes {
					if fn.base != nil {
						n++
					}
				}
				return n
			})),
	}
}

// Built returns a channel closed once every source has been listed.
func (v *FitView) Built() <-chan struct{} { return v.builtChan() }

func (v *FitView) builtChan() chan struct{} {
	v.buildOnce.Do(func() { v.built = make(chan struct{}) })
	return v.built
}

// ReadyCheck is a healthz checker: ready once every source has been listed,
// so that a replica never judges resource-fit on a cluster without Pods.
func (v *FitView) ReadyCheck(_ *http.Request) error {
	select {
	case <-v.Built():
		return nil
	default:
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	var missing []string
	for _, s := range fitSources {
		if !v.listed[s] {
			missing = append(missing, s)
		}
	}
	return fmt.Errorf("fit view: not listed yet: %v", missing)
}

// Start implements manager.Runnable: it runs the four reflectors until ctx
// ends.
func (v *FitView) Start(ctx context.Context) error {
	if v.Nodes == nil || v.Pods == nil || v.PriorityClasses == nil || v.Namespaces == nil {
		return errors.New("fit view: a lister-watcher is missing")
	}
	v.init()
	v.builtChan()
	if v.After != nil {
		select {
		case <-ctx.Done():
			return nil
		case <-v.After:
		}
	}
	reflectors := []*toolscache.Reflector{
		toolscache.NewReflectorWithOptions(v.Nodes, &corev1.Node{}, fitNodeStore{v}, toolscache.ReflectorOptions{Name: "fit-nodes"}),
		toolscache.NewReflectorWithOptions(v.Pods, &corev1.Pod{}, fitPodStore{v}, toolscache.ReflectorOptions{Name: "fit-pods"}),
		toolscache.NewReflectorWithOptions(v.PriorityClasses, &schedulingv1.PriorityClass{}, fitClassStore{v},
			toolscache.ReflectorOptions{Name: "fit-priorityclasses"}),
		toolscache.NewReflectorWithOptions(v.Namespaces, &corev1.Namespace{}, fitNamespaceStore{v},
			toolscache.ReflectorOptions{Name: "fit-namespaces"}),
	}
	var wg sync.WaitGroup
	for _, r := range reflectors {
		wg.Go(func() { runReflector(ctx, r, toolscache.DefaultWatchErrorHandler) })
	}
	wg.Wait()
	return nil
}

func (v *FitView) init() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.nodes == nil {
		v.nodes, v.pods, v.classes = map[string]*fitNode{}, map[string]podPlace{}, map[string]schedulingv1.PriorityClass{}
		v.namespaces, v.dirty, v.listed = map[string]map[string]string{}, map[string]struct{}{}, map[string]bool{}
		v.labels, v.podLabels = labelTable{}, labelTable{}
	}
}

// Cluster returns the current fit.Cluster, or nil before every source has
// been listed. It rebuilds the nodes whose Pods changed since the last call
// and shares the rest; with no change it returns the last one.
func (v *FitView) Cluster() *fit.Cluster {
	select {
	case <-v.Built():
	default:
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.changed && v.snapshot != nil {
		return v.snapshot
	}
	for name := range v.dirty {
		if n := v.nodes[name]; n != nil {
			n.publish()
		}
	}
	clear(v.dirty)
	if v.order == nil {
		v.order = make([]string, 0, len(v.nodes))
		for name, n := range v.nodes {
			if n.base != nil {
				v.order = append(v.order, name)
			}
		}
		slices.Sort(v.order)
	}
	list := make([]*fit.Node, len(v.order))
	for i, name := range v.order {
		list[i] = v.nodes[name].published
	}
	classes := slices.Collect(maps.Values(v.classes))
	// Namespaces change rarely; the map is copied so that the Cluster
	// handed out never sees a later change.
	v.snapshot = fit.NewCluster(list, classes, maps.Clone(v.namespaces))
	v.changed = false
	return v.snapshot
}

// publish rebuilds the node's published form from its records.
func (n *fitNode) publish() {
	if n.base == nil {
		n.published = nil
		return
	}
	p := *n.base
	p.Pods, p.Nominated = n.bound, n.nominated
	p.Sorted()
	n.published = &p
}

// node returns the node named name, creating it; mu is held.
func (v *FitView) node(name string) *fitNode {
	n := v.nodes[name]
	if n == nil {
		n = &fitNode{name: name}
		v.nodes[name] = n
	}
	return n
}

// touch marks the node out of date; mu is held.
func (v *FitView) touch(name string) {
	v.dirty[name] = struct{}{}
	v.changed = true
}

// forget drops a node that holds nothing any more; mu is held.
func (v *FitView) forget(name string) {
	if n := v.nodes[name]; n != nil && n.base == nil && len(n.bound) == 0 && len(n.nominated) == 0 {
		delete(v.nodes, name)
		delete(v.dirty, name)
	}
}

// markListed notes a source's first list; mu is held.
func (v *FitView) markListed(source string) {
	if v.listed[source] {
		return
	}
	v.listed[source] = true
	for _, s := range fitSources {
		if !v.listed[s] {
			return
		}
	}
	v.Log.Info("fit view built", "nodes", len(v.nodes), "pods", len(v.pods), "priorityClasses", len(v.classes))
	close(v.builtChan())
}

// locked runs f under mu.
func (v *FitView) locked(f func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f()
}

// --- Nodes ---

// fitNodeStore applies Nodes: their name, labels and allocatable.
type fitNodeStore struct{ v *FitView }

func (s fitNodeStore) Add(obj any) error    { return s.Update(obj) }
func (s fitNodeStore) Resync() error        { return nil }
func (s fitNodeStore) Update(obj any) error { return s.each([]any{obj}, "", false) }
func (s fitNodeStore) Delete(obj any) error { return s.each([]any{obj}, "", true) }

// Replace applies a complete list: nodes not in it are gone.
func (s fitNodeStore) Replace(list []any, _ string) error { return s.each(list, "nodes", false) }

// Transformer reduces each Node of a streamed list to its record as it
// arrives: at start-up the list is held whole until Replace, beside the
// node view's own.
func (s fitNodeStore) Transformer() toolscache.TransformFunc {
	return func(obj any) (any, error) { return nodeRecordOf(obj) }
}

// nodeRecord is a Node reduced to what the view keeps, with the metadata a
// reflector's store keys it by.
type nodeRecord struct {
	metav1.ObjectMeta
	// node has no Labels: labels stands for them without the hostname
	// (node.Hostname), interned process-wide, so that the records of
	// nodes alike share one string.
	node   *fit.Node
	labels unique.Handle[string]
}

// nodeRecordOf reduces a Node (or passes a record on).
func nodeRecordOf(obj any) (*nodeRecord, error) {
	if r, ok := obj.(*nodeRecord); ok {
		return r, nil
	}
	n, err := nodeOf(obj)
	if err != nil {
		return nil, err
	}
	fn := fit.NodeOf(n)
	fn.Labels, fn.Hostname = nil, n.Labels[corev1.LabelHostname]
	return &nodeRecord{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, node: fn, labels: unique.Make(fit.LabelsKey(n.Labels, corev1.LabelHostname))}, nil
}

// each applies objs (deleting them with remove); a non-empty listed is the
// source a complete list came from.
func (s fitNodeStore) each(objs []any, listed string, remove bool) error {
	recs := make([]*nodeRecord, 0, len(objs))
	for _, obj := range objs {
		r, err := nodeRecordOf(obj)
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	v := s.v
	v.locked(func() {
		if listed != "" {
			seen := make(map[string]bool, len(recs))
			for _, r := range recs {
				seen[r.Name] = true
			}
			for name, n := range v.nodes {
				if n.base != nil && !seen[name] {
					v.removeNode(name)
				}
			}
		}
		for _, r := range recs {
			if remove {
				v.removeNode(r.Name)
			} else {
				v.applyNode(r)
			}
		}
		if listed != "" {
			v.markListed(listed)
		}
	})
	return nil
}

// applyNode adds or updates a node's base; an update that changes no
// label or allocatable (a heartbeat) changes nothing. mu is held.
func (v *FitView) applyNode(r *nodeRecord) {
	fn := v.node(r.Name)
	n := r.node
	if b := fn.base; b != nil && b.AllowedPods == n.AllowedPods && b.Allocatable.Equal(n.Allocatable) &&
		fn.labels == r.labels && b.Hostname == n.Hostname {
		return
	}
	if fn.base == nil {
		v.order = nil
	} else {
		v.labels.release(fn.labels)
	}
	base := *n
	base.Labels = v.labels.hold(r.labels)
	fn.base, fn.labels = &base, r.labels
	v.touch(r.Name)
}

// labelTable shares one map among the holders of the same labels: the
// nodes whose labels are the same but for kubernetes.io/hostname (the nodes
// of a pool in a zone, mostly: at 65,000 nodes a map of a dozen labels per
// node would be some 80 MiB), the Pods of one workload. Entries are counted
// and dropped with their last holder.
type labelTable map[unique.Handle[string]]*sharedLabels

type sharedLabels struct {
	labels map[string]string
	refs   int
}

// hold returns the shared map for key, counting one more holder.
func (t labelTable) hold(key unique.Handle[string]) map[string]string {
	s := t[key]
	if s == nil {
		s = &sharedLabels{labels: map[string]string{}}
		parts := strings.Split(key.Value(), "\x00")
		for i := 0; i+1 < len(parts); i += 2 {
			s.labels[parts[i]] = parts[i+1]
		}
		t[key] = s
	}
	s.refs++
	return s.labels
}

// release counts one holder of key less.
func (t labelTable) release(key unique.Handle[string]) {
	if s := t[key]; s != nil {
		if s.refs--; s.refs == 0 {
			delete(t, key)
		}
	}
}

// removeNode drops a node's base; its Pods' records stay until they are
// deleted too. mu is held.
func (v *FitView) removeNode(name string) {
	fn := v.nodes[name]
	if fn == nil || fn.base == nil {
		return
	}
	fn.base = nil
	v.labels.release(fn.labels)
	fn.labels = unique.Handle[string]{}
	v.order = nil
	v.touch(name)
	v.forget(name)
}

// --- Pods ---

// fitPodStore applies Pods as their fit.Pod records.
type fitPodStore struct{ v *FitView }

// podRecord is a Pod reduced to what the view keeps, with the metadata a
// reflector's store keys it by.
type podRecord struct {
	metav1.ObjectMeta
	// node is where the Pod is bound, or nominated; "" when it is neither
	// or has finished.
	node      string
	nominated bool
	digest    uint64
	// pod is the Pod until its record is made (make): an update whose
	// digest is the held one's never makes it.
	pod *corev1.Pod
	rec fit.Pod
	// labels stands for rec.Labels, interned process-wide.
	labels unique.Handle[string]
	// err is set when the record cannot be built (a malformed
	// anti-affinity term, which the API server's validation refuses).
	err error
}

// digestSeed seeds the digests of the process's Pods: chosen at random, so
// that no one can craft two versions of a Pod that look the same to it.
var digestSeed = maphash.MakeSeed()

// recordOf reduces a Pod (or passes a record on) to where it is and its
// digest; make makes the record itself. A Pod that has finished or is
// neither bound nor nominated has no place. The record shares what it
// can: its namespace is a part of its key; its labels and its owner's
// name are interned (intern) when the record is kept.
func recordOf(obj any) (*podRecord, error) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch o := obj.(type) {
	case *podRecord:
		return o, nil
	case *corev1.Pod:
		r := &podRecord{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace}}
		if o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed {
			return r, nil
		}
		r.node = o.Spec.NodeName
		if r.node == "" {
			r.node, r.nominated = o.Status.NominatedNodeName, true
		}
		if r.node == "" {
			return r, nil
		}
		r.digest, r.pod = fit.Digest(digestSeed, o), o
		return r, nil
	}
	return nil, fmt.Errorf("fit view: %T is not a Pod", obj)
}

// make makes the record from the Pod, once, and lets the Pod go.
func (r *podRecord) make() {
	if r.pod != nil {
		r.rec, r.err = fit.PodOf(r.pod)
		r.pod = nil
	}
}

// key is the Pod's namespace/name: the whole key its record holds.
func (r *podRecord) key() string {
	if r.rec.Shape != nil {
		return r.rec.Prefix
	}
	return r.Namespace + "/" + r.Name
}

// share takes the interned labels of held, the record the view holds for
// the Pod, when they are the Pod's: an update that changes nothing then
// neither builds their key nor interns anything.
func (r *podRecord) share(held *fit.Pod, labels unique.Handle[string]) {
	if r.labels == (unique.Handle[string]{}) && maps.Equal(r.rec.Labels, held.Labels) {
		r.labels = labels
	}
}

// intern interns the record's labels and owner, where share has not.
func (r *podRecord) intern() {
	if r.labels == (unique.Handle[string]{}) {
		r.labels = unique.Make(fit.LabelsKey(r.rec.Labels, ""))
	}
	if r.rec.Owner != "" {
		r.rec.Owner = unique.Make(r.rec.Owner).Value()
	}
}

func (s fitPodStore) Add(obj any) error    { return s.Update(obj) }
func (s fitPodStore) Resync() error        { return nil }
func (s fitPodStore) Update(obj any) error { return s.each([]any{obj}, false, false) }
func (s fitPodStore) Delete(obj any) error { return s.each([]any{obj}, true, false) }

// Replace applies a complete list: Pods not in it are gone.
func (s fitPodStore) Replace(list []any, _ string) error { return s.each(list, false, true) }

// Transformer reduces each Pod of a streamed list to its record as it
// arrives, so the list never holds Pods (nor their label maps).
func (s fitPodStore) Transformer() toolscache.TransformFunc {
	return func(obj any) (any, error) {
		r, err := recordOf(obj)
		if err != nil {
			return nil, err
		}
		r.make()
		if r.rec.Shape != nil {
			r.intern()
		}
		return r, nil
	}
}

func (s fitPodStore) each(objs []any, remove, complete bool) error {
	recs := make([]*podRecord, 0, len(objs))
	for _, obj := range objs {
		r, err := recordOf(obj)
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	v := s.v
	v.locked(func() {
		if complete {
			seen := make(map[string]bool, len(recs))
			for _, r := range recs {
				seen[r.key()] = true
			}
			for key := range v.pods {
				if !seen[key] {
					v.removePod(key)
				}
			}
		}
		for _, r := range recs {
			key := r.key()
			switch {
			case remove || r.node == "":
				v.removePod(key)
			default:
				v.applyPod(key, r)
			}
		}
		if complete {
			v.markListed("pods")
		}
	})
	return nil
}

// applyPod adds or updates a Pod's record; an update that changes nothing
// of it changes nothing, and one with the held digest is not even made
// into a record. mu is held.
func (v *FitView) applyPod(key string, r *podRecord) {
	old, kept := v.pods[key]
	samePlace := kept && old.node.name == r.node && old.nominated == r.nominated
	if samePlace && old.digest == r.digest {
		return
	}
	r.make()
	if r.err != nil {
		// Left out rather than counted wrong; the API server refuses
		// such a Pod, so this is a Pod from a newer API.
		v.Log.Error(r.err, "pod left out of the fit view", "pod", key)
		v.removePod(key)
		return
	}
	if samePlace {
		records := *old.node.records(old.nominated)
		if i := indexOf(records, key); i >= 0 {
			r.share(&records[i], old.labels)
			if old.labels == r.labels && records[i].Same(&r.rec) {
				old.digest = r.digest
				v.pods[key] = old
				return
			}
		}
	}
	if kept {
		v.removePod(key)
	}
	r.intern()
	fn := v.node(r.node)
	rec := r.rec
	rec.Labels = v.podLabels.hold(r.labels)
	held := fn.records(r.nominated)
	next := make([]fit.Pod, len(*held), len(*held)+1)
	copy(next, *held)
	next = append(next, rec)
	fit.SortPods(next)
	*held = next
	// The record's own Shape holds its whole key (PodOf): the view keys it
	// by that string.
	v.pods[rec.Prefix] = podPlace{node: fn, nominated: r.nominated, digest: r.digest, labels: r.labels}
	v.touch(fn.name)
}

// indexOf returns the index of the record of key, or -1.
func indexOf(pods []fit.Pod, key string) int {
	return slices.IndexFunc(pods, func(p fit.Pod) bool { return p.HasKey(key) })
}

// removePod drops a Pod's record; mu is held.
func (v *FitView) removePod(key string) {
	place, ok := v.pods[key]
	if !ok {
		return
	}
	delete(v.pods, key)
	v.podLabels.release(place.labels)
	fn := place.node
	held := fn.records(place.nominated)
	if i := indexOf(*held, key); i >= 0 {
		next := make([]fit.Pod, 0, len(*held)-1)
		next = append(append(next, (*held)[:i]...), (*held)[i+1:]...)
		if len(next) == 0 {
			next = nil
		}
		*held = next
	}
	v.touch(fn.name)
	v.forget(fn.name)
}

// --- PriorityClasses and Namespaces ---

// fitClassStore applies PriorityClasses.
type fitClassStore struct{ v *FitView }

func (s fitClassStore) Add(obj any) error    { return s.Update(obj) }
func (s fitClassStore) Resync() error        { return nil }
func (s fitClassStore) Update(obj any) error { return s.each([]any{obj}, false, false) }
func (s fitClassStore) Delete(obj any) error { return s.each([]any{obj}, true, false) }
func (s fitClassStore) Replace(list []any, _ string) error {
	return s.each(list, false, true)
}

func (s fitClassStore) each(objs []any, remove, complete bool) error {
	classes := make([]schedulingv1.PriorityClass, 0, len(objs))
	for _, obj := range objs {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		c, ok := obj.(*schedulingv1.PriorityClass)
		if !ok {
			return fmt.Errorf("fit view: %T is not a PriorityClass", obj)
		}
		// What admission reads of a class, and nothing else.
		classes = append(classes, schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: c.Name},
			Value: c.Value, GlobalDefault: c.GlobalDefault, PreemptionPolicy: c.PreemptionPolicy})
	}
	s.v.locked(func() {
		if complete {
			clear(s.v.classes)
		}
		for _, c := range classes {
			if remove {
				delete(s.v.classes, c.Name)
			} else {
				s.v.classes[c.Name] = c
			}
		}
		s.v.changed = true
		if complete {
			s.v.markListed("priorityclasses")
		}
	})
	return nil
}

// fitNamespaceStore applies Namespaces' labels, which anti-affinity terms'
// namespace selectors match.
type fitNamespaceStore struct{ v *FitView }

func (s fitNamespaceStore) Add(obj any) error    { return s.Update(obj) }
func (s fitNamespaceStore) Resync() error        { return nil }
func (s fitNamespaceStore) Update(obj any) error { return s.each([]any{obj}, false, false) }
func (s fitNamespaceStore) Delete(obj any) error { return s.each([]any{obj}, true, false) }
func (s fitNamespaceStore) Replace(list []any, _ string) error {
	return s.each(list, false, true)
}

func (s fitNamespaceStore) each(objs []any, remove, complete bool) error {
	nss := make([]*corev1.Namespace, 0, len(objs))
	for _, obj := range objs {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		ns, ok := obj.(*corev1.Namespace)
		if !ok {
			return fmt.Errorf("fit view: %T is not a Namespace", obj)
		}
		nss = append(nss, ns)
	}
	v := s.v
	v.locked(func() {
		if complete {
			clear(v.namespaces)
			v.changed = true
		}
		for _, ns := range nss {
			switch old, ok := v.namespaces[ns.Name]; {
			case remove:
				delete(v.namespaces, ns.Name)
				v.changed = true
			case !ok || !maps.Equal(old, ns.Labels):
				v.namespaces[ns.Name] = ns.Labels
				v.changed = true
			}
		}
		if complete {
			v.markListed("namespaces")
		}
	})
	return nil
}
