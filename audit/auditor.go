package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/policy"
)

// Auditor is the leader-elected loop that keeps watching coverage after
// admission. It is a rate-limited work queue keyed by DaemonSet: a DaemonSet
// change re-audits that DaemonSet; a node change re-audits only the
// DaemonSets whose placement on that node it changes; every Interval, all
// of them are re-audited, so that a gap turns persistent and a policy change
// is seen. Auditing one DaemonSet re-predicts its coverage and re-reads its
// status counters. It emits Events on changes only (CoverageReduced,
// CoverageGap, PersistentGap, Misscheduled, CoverageRestored,
// PolicyViolation) and keeps per-DaemonSet gauges current. Only the leader
// runs it, so Events are not duplicated across replicas; a new leader
// records the state of the DaemonSets it finds without Events, so a failover
// does not repeat them.
type Auditor struct {
	Cache cache.Cache
	// Pods lists the Pods of one DaemonSet on demand (an uncached reader):
	// the fit view keeps records of Pods, not Pods.
	Pods  client.Reader
	Nodes *clusterview.NodeView
	// Fit, when set, returns what kube-scheduler weighs on the nodes, or
	// nil until it is known: resource-fit and priority-class judge by it.
	Fit func() *fit.Cluster
	// Others, when set, lists the DaemonSets an audited one is compared
	// with (a memoized list); unset, the cache is listed for each audit.
	Others   func(ctx context.Context) ([]*appsv1.DaemonSet, error)
	Source   *clusterview.PolicySource
	Recorder events.EventRecorder
	Log      logr.Logger
	Metrics  *Metrics
	// OwnNamespace is never audited, like it is never admitted.
	OwnNamespace string
	// Interval re-audits even without changes, so a gap turns persistent.
	Interval time.Duration
	// Window is how long a gap lasts before it is persistent.
	Window time.Duration
	// Reports publishes the audit as OpenReports Reports; nil skips them.
	Reports *ReportWriter
	Now     func() time.Time
	// NodeChangeSpacing is the least time between two audits of one
	// DaemonSet that node changes start; zero means
	// DefaultNodeChangeSpacing. A change after a quiet spell is audited at
	// once; under a stream of them (nodes joining one after another, taints
	// coming and going) each DaemonSet is audited once per spacing with
	// every change so far, not once per change: each audit weighs every
	// node it covers.
	NodeChangeSpacing time.Duration
	// FitReuse is how long audits read one fit cluster before they ask
	// Fit for the current one; zero means DefaultFitReuse, a negative
	// value asks at every audit.
	FitReuse time.Duration

	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]
	// fitCluster is the cluster the audits read, asked for at fitTaken
	// (monotonic time); it belongs to the worker goroutine.
	fitCluster *fit.Cluster
	fitTaken   time.Time
	// seen, gapClock and quiet belong to the worker goroutine.
	seen       map[types.NamespacedName]*auditMemory
	gapClock   GapClock
	exemptions exemptionTally
	// quiet holds the DaemonSets present when this replica became leader:
	// their first audit records their state without Events.
	quiet map[types.NamespacedName]bool

	mu           sync.Mutex
	nodeChanges  []clusterview.NodeChange
	nodesChanged chan struct{}
	// audited is when each DaemonSet's last audit began (monotonic time),
	// for NodeChangeSpacing; under mu.
	audited map[types.NamespacedName]time.Time
}

// DefaultFitReuse bounds how old the Pods an audit weighs can be. Under Pod
// churn the fit view makes a new cluster at every ask (a list, the names and
// the sums of every node: 3.6 MB at 65,000 nodes), and a periodic pass asked
// once per DaemonSet; at 65,000 nodes that garbage set the peak of the
// replica's memory while Pods were created. The auditor is not the
// admission: a Pod change it weighs a second late is weighed.
const DefaultFitReuse = time.Second

// DefaultNodeChangeSpacing keeps the time from a node change to its Event
// well inside the few seconds an operator expects, and halves the audits a
// stream of one change a second starts.
const DefaultNodeChangeSpacing = 2 * time.Second

// auditMemory is what the auditor remembers of a DaemonSet between passes, to
// fire Events on changes only.
type auditMemory struct {
	// gaps are the skips for counted taints (Coverage.Gaps) at the last
	// audit: runs of the snapshot's classes, not names (see
	// coverage.NewlySkipped), so remembering them costs the classes, which
	// the snapshot shares, instead of a name per skipped node. A class that
	// changed since stays alive in its old version until the DaemonSets
	// holding it are audited again (at the latest at --audit-interval): at
	// most one copy of each of its skipped classes per DaemonSet.
	gaps       []coverage.Skip
	state      StatusState
	violations string
	exemptions string
	// inputs are what the last audit read; timeless is set when time
	// alone cannot change its outcome (see audit).
	inputs   auditInputs
	timeless bool
}

// auditInputs are what an audit of one DaemonSet reads: the object (its
// resourceVersion moves with its spec, metadata and status), the node
// snapshot, the fit view's cluster, the policy's generation and the other
// DaemonSets. The snapshot, the cluster and the list are shared and
// replaced, never changed, so the same pointers mean the same contents.
// The pointers are weak: each DaemonSet remembers the inputs of its last
// audit, and held strongly they kept a snapshot and a cluster alive per
// DaemonSet audited at a different moment. Under Pod churn at 65,000
// nodes those were most of the heap (56 bytes a node each, list, names and
// sums), and a weak pointer still compares equal only to its own object.
type auditInputs struct {
	version string
	nodes   weak.Pointer[coverage.NodeSnapshot]
	fit     weak.Pointer[fit.Cluster]
	policy  int64
	// others is the first element of the others' list and its length: the
	// lister hands out one list until a DaemonSet changes; a list made
	// anew each time never matches.
	others  weak.Pointer[*appsv1.DaemonSet]
	nOthers int
}

// Metrics are the per-DaemonSet gauges. Labels are bounded by the number
// of DaemonSets (and fixed sets of reasons, counters and states), never by nodes.
type Metrics struct {
	// daemonSets exports dsguard_daemonset_uncovered_nodes{reason},
	// dsguard_daemonset_predicted_nodes, dsguard_daemonset_status{counter}
	// and dsguard_daemonset_state{state}.
	daemonSets *daemonSetGauges
	// Exemptions is dsguard_exemptions_active{rule,namespace}.
	Exemptions *prometheus.GaugeVec
	// Running is dsguard_auditor_running: 1 on the replica whose auditor
	// runs (the Lease holder), so that an alert can tell when none does.
	Running prometheus.Gauge
}

// NewMetrics creates and registers the gauges.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{daemonSets: newDaemonSetGauges(), Exemptions: newExemptionsGauge(),
		Running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dsguard_auditor_running",
			Help: "1 while this replica's auditor runs (it holds the audit Lease), else 0. Across replicas the sum should be 1: with 0 no Events, gap states, reports or coverage gauges are produced.",
		})}
	reg.MustRegister(m.daemonSets, m.Exemptions, m.Running)
	return m
}

// coarseTicks is the real clock with tickers no faster than minQueueTick.
// The audit queue's metrics refresh its unfinished-work gauges on a 500ms
// ticker whether anything is queued or not, and on an idle dsguard those
// wakeups were a good part of what it did. With it,
// workqueue_unfinished_work_seconds and
// workqueue_longest_running_processor_seconds move every 5 seconds, still
// well inside a scrape interval. Timers (the queue's delays and backoffs)
// keep their time.
type coarseTicks struct{ clock.RealClock }

const minQueueTick = 5 * time.Second

func (coarseTicks) NewTicker(d time.Duration) clock.Ticker {
	return clock.RealClock{}.NewTicker(max(d, minQueueTick))
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (a *Auditor) NeedLeaderElection() bool { return true }

// reportFlushEvery bounds how long a changed Report waits while the queue
// never runs empty.
const reportFlushEvery = 2 * time.Second

// Start implements manager.Runnable.
func (a *Auditor) Start(ctx context.Context) error {
	a.beginTerm()
	defer a.endTerm()
	a.nodesChanged = make(chan struct{}, 1)
	if a.Now == nil {
		a.Now = time.Now
	}
	if a.Interval == 0 {
		a.Interval = 30 * time.Second
	}
	// The handlers below use this term's queue, not the field: a handler of
	// an earlier term may still be running when a new term replaces it (the
	// race detector caught one), and a shut-down queue ignores what it adds.
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "dsguard_audit", Clock: coarseTicks{}})
	a.queue = queue
	defer queue.ShutDown()

	inf, err := a.Cache.GetInformer(ctx, &appsv1.DaemonSet{})
	if err != nil {
		return fmt.Errorf("DaemonSet informer: %w", err)
	}
	enqueue := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if ds, ok := obj.(*appsv1.DaemonSet); ok && ds.Namespace != a.OwnNamespace {
			queue.Add(types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name})
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			// A resync delivers the same object again: nothing changed.
			o, ok1 := oldObj.(*appsv1.DaemonSet)
			n, ok2 := newObj.(*appsv1.DaemonSet)
			if ok1 && ok2 && o.ResourceVersion == n.ResourceVersion {
				return
			}
			enqueue(newObj)
		},
		DeleteFunc: enqueue,
	})
	if err != nil {
		return fmt.Errorf("DaemonSet informer: %w", err)
	}
	// A replica that loses and regains leadership starts again: what this
	// run registered goes with it.
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	defer a.Nodes.OnChange(func(c clusterview.NodeChange) {
		a.mu.Lock()
		a.nodeChanges = append(a.nodeChanges, c)
		a.mu.Unlock()
		notify(a.nodesChanged)
	})()
	if !a.Cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	// The first pass after the election: every DaemonSet, recorded quietly.
	dss, err := a.daemonSets(ctx)
	if err != nil {
		return err
	}
	for _, ds := range dss {
		key := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}
		a.quiet[key] = true
		a.queue.Add(key)
	}

	var wg sync.WaitGroup
	defer func() {
		// The worker returns once the queue shuts down.
		a.queue.ShutDown()
		wg.Wait()
	}()
	wg.Go(func() {
		lastFlush := time.Now()
		for a.processNext(ctx) {
			if a.queue.Len() == 0 || time.Since(lastFlush) > reportFlushEvery {
				a.flushReports(ctx)
				lastFlush = time.Now()
			}
		}
	})

	tick := time.NewTicker(a.Interval)
	defer tick.Stop()
	// A new policy generation re-audits every DaemonSet, since any rule may
	// judge them differently. The source says when it changes: an idle
	// auditor wakes for nothing else than its interval.
	policyChanged := a.Source.Changed()
	var generation int64
	if p := a.Source.Current(); p != nil {
		generation = p.Generation
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			a.enqueueAll(ctx)
		case <-policyChanged:
			policyChanged = a.Source.Changed()
			if p := a.Source.Current(); p != nil && p.Generation != generation {
				generation = p.Generation
				a.enqueueAll(ctx)
			}
		case <-a.nodesChanged:
			a.enqueueForNodes(ctx)
		}
	}
}

// daemonSets lists the audited DaemonSets from the cache without deep
// copies (shallow copies share the cache's maps and slices): callers only
// read them (names and placements), and a node change lists every
// DaemonSet, so deep copies would make each relevant node change cost a
// copy of every DaemonSet.
func (a *Auditor) daemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	var list appsv1.DaemonSetList
	if err := a.Cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*appsv1.DaemonSet, 0, len(list.Items))
	for i := range list.Items {
		if ds := &list.Items[i]; ds.Namespace != a.OwnNamespace {
			out = append(out, ds)
		}
	}
	return out, nil
}

func (a *Auditor) enqueueAll(ctx context.Context) {
	dss, err := a.daemonSets(ctx)
	if err != nil {
		a.Log.Error(err, "listing DaemonSets")
		return
	}
	for _, ds := range dss {
		a.queue.Add(types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name})
	}
}

// enqueueForNodes takes the node changes so far and enqueues each DaemonSet
// whose placement on a changed node differs before and after the change. A
// node added or deleted changes every DaemonSet's counts.
func (a *Auditor) enqueueForNodes(ctx context.Context) {
	a.mu.Lock()
	changes := a.nodeChanges
	a.nodeChanges = nil
	a.mu.Unlock()
	if len(changes) == 0 {
		return
	}
	dss, err := a.daemonSets(ctx)
	if err != nil {
		a.Log.Error(err, "listing DaemonSets")
		return
	}
	spacing := cmp.Or(a.NodeChangeSpacing, DefaultNodeChangeSpacing)
	now := time.Now()
	for _, ds := range dss {
		for _, c := range changes {
			if c.Old == nil || c.New == nil || coverage.Decide(ds, c.Old) != coverage.Decide(ds, c.New) {
				key := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}
				// A DaemonSet waiting in the queue collects the later
				// changes too: the delaying queue keeps the earliest time.
				if wait := spacing - now.Sub(a.lastAudited(key)); wait > 0 {
					a.queue.AddAfter(key, wait)
				} else {
					a.queue.Add(key)
				}
				break
			}
		}
	}
}

// lastAudited returns when key's last audit began; zero when never.
func (a *Auditor) lastAudited(key types.NamespacedName) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.audited[key]
}

// markAudited records that key's audit begins now, or forgets key.
func (a *Auditor) markAudited(key types.NamespacedName, gone bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if gone {
		delete(a.audited, key)
		return
	}
	if a.audited == nil {
		a.audited = map[types.NamespacedName]time.Time{}
	}
	a.audited[key] = time.Now()
}

// processNext audits the next DaemonSet of the queue; false once the queue
// shuts down.
func (a *Auditor) processNext(ctx context.Context) bool {
	key, shutdown := a.queue.Get()
	if shutdown {
		return false
	}
	defer a.queue.Done(key)
	if err := a.audit(ctx, key); err != nil {
		a.Log.Error(err, "auditing a DaemonSet", "daemonset", key)
		a.queue.AddRateLimited(key)
		return true
	}
	a.queue.Forget(key)
	return true
}

// errNotReady retries a DaemonSet while the nodes or the policy are unknown.
var errNotReady = errors.New("the node view or the policy is not ready yet")

// audit audits one DaemonSet, or forgets it when it is gone.
func (a *Auditor) audit(ctx context.Context, key types.NamespacedName) error {
	a.markAudited(key, false) // before reading anything: see enqueueForNodes
	snap := a.Nodes.Snapshot()
	active := a.Source.Current()
	if snap == nil || active == nil {
		return errNotReady
	}
	// The cache's own object, shallow-copied, not a deep copy: nothing the
	// audit does changes it (TestAuditor_LeavesTheDaemonSetAlone), and a
	// relevant node change audits every DaemonSet it concerns, so deep
	// copies were about a tenth of dsguard's CPU under 5 relevant Node
	// updates per second with 3,000 DaemonSets (CPU profile).
	ds := &appsv1.DaemonSet{}
	if err := a.Cache.Get(ctx, key, ds, client.UnsafeDisableDeepCopy); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		ds = nil
	}
	if ds == nil || ds.DeletionTimestamp != nil {
		a.markAudited(key, true)
		delete(a.seen, key)
		delete(a.quiet, key)
		a.gapClock.Forget(key)
		a.forget(key)
		if a.Reports != nil {
			a.Reports.Remove(key)
		}
		return nil
	}
	cluster := a.cluster()
	others := a.others(ctx)
	in := auditInputs{version: ds.ResourceVersion, nodes: weak.Make(snap), fit: weak.Make(cluster), policy: active.Generation,
		nOthers: len(others)}
	if len(others) > 0 {
		in.others = weak.Make(&others[0])
	}
	// The periodic pass re-audits every DaemonSet so that a gap turns
	// persistent in time; one whose inputs are those of its last audit and
	// whose outcome time cannot change (no gap, no exemption or intended
	// coverage that may expire) would come out the same: Events, metrics
	// and reports only follow changes. Under Pod churn the fit view's
	// cluster changes, and then the DaemonSet is audited again.
	if mem := a.seen[key]; mem != nil && mem.timeless && mem.inputs == in && !a.quiet[key] {
		return nil
	}
	now := a.Now()
	a.gapClock.Track(ds, now)
	entries := Run(Input{DaemonSets: []*appsv1.DaemonSet{ds}, Nodes: snap, Policy: active.Policy,
		Now: now, GapSince: a.gapClock, Window: a.Window, Fit: cluster,
		Others: func() []*appsv1.DaemonSet { return others }})
	quiet := a.quiet[key]
	delete(a.quiet, key)
	a.observe(ctx, &entries[0], snap, quiet)
	if a.Reports != nil {
		a.Reports.Set(&entries[0])
	}
	if mem := a.seen[key]; mem != nil {
		mem.inputs, mem.timeless = in, entries[0].Status.Gap == 0 && !mayExpire(ds)
	}
	return nil
}

// cluster returns the fit cluster an audit reads: the one asked for less
// than FitReuse ago, or else the current one; nil without Fit or before
// the fit view knows the cluster.
func (a *Auditor) cluster() *fit.Cluster {
	if a.Fit == nil {
		return nil
	}
	reuse := cmp.Or(a.FitReuse, DefaultFitReuse)
	if a.fitCluster == nil || reuse < 0 || time.Since(a.fitTaken) >= reuse {
		a.fitCluster, a.fitTaken = a.Fit(), time.Now()
	}
	return a.fitCluster
}

// mayExpire reports whether ds carries an annotation whose effect can end
// with time: an exemption or an intended coverage.
func mayExpire(ds *appsv1.DaemonSet) bool {
	for k := range ds.Annotations {
		if strings.HasPrefix(k, policy.ExemptionAnnotationPrefix) || k == policy.IntendedCoverageAnnotation {
			return true
		}
	}
	return false
}

func (a *Auditor) flushReports(ctx context.Context) {
	if a.Reports != nil {
		a.Reports.Flush(ctx, a.Now())
	}
}

// observe compares one DaemonSet with what was seen before and reports changes.
// quiet records the state without Events (the first audit after an election).
func (a *Auditor) observe(ctx context.Context, e *Entry, snap *coverage.NodeSnapshot, quiet bool) {
	key := e.Key()
	ds := e.DaemonSet
	mem, known := a.seen[key]
	if !known {
		mem = &auditMemory{}
		a.seen[key] = mem
	}
	a.record(e)
	a.observeExemptions(e, mem, quiet && !known)
	if quiet && !known {
		mem.gaps = e.Coverage.Gaps()
		mem.state = e.Status.State
		mem.violations = violations(e.Findings)
		return
	}

	// Coverage got worse: a node joined or changed and is now skipped.
	gaps := e.Coverage.Gaps()
	if known && e.Intended == "" {
		if count, first := coverage.NewlySkipped(mem.gaps, gaps, newlySkippedNamed); count > 0 {
			a.event(ds, corev1.EventTypeWarning, "CoverageReduced", "now skips %d of %d nodes; newly skipped: %s",
				coverage.NodesIn(gaps), e.Coverage.Total, describeNewlySkipped(count, first, gaps))
		}
	}
	mem.gaps = gaps

	// The status counters changed state. Gaps are Warnings (also when first
	// seen); the other transitions are Normal Events, except the brief
	// NotObserved after every spec change.
	if st := e.Status.State; st != mem.state {
		switch {
		case e.Status.HasGap():
			msg := e.Status.Reason
			if st == StatePersistentGap {
				msg += "; " + a.investigate(ctx, e, snap)
			}
			a.event(ds, corev1.EventTypeWarning, string(st), "%s", msg)
		case !known || st == StateNotObserved:
		case st == StateHealthy && isGapState(mem.state):
			a.event(ds, corev1.EventTypeNormal, "CoverageRestored", "%s", e.Status.Reason)
		default:
			a.event(ds, corev1.EventTypeNormal, string(st), "%s", e.Status.Reason)
		}
		mem.state = st
	}

	// The live object breaks the policy (it was admitted before the policy
	// changed, under a warn policy, or by a bypass).
	if v := violations(e.Findings); v != mem.violations {
		if v != "" {
			a.event(ds, corev1.EventTypeWarning, "PolicyViolation", "%s", v)
		}
		mem.violations = v
	}
}

func isGapState(s StatusState) bool {
	return s == StateCoverageGap || s == StatePersistentGap || s == StateMisscheduled
}

// investigate says, node by node, why the DaemonSet has no ready Pod there.
func (a *Auditor) investigate(ctx context.Context, e *Entry, snap *coverage.NodeSnapshot) string {
	if a.Pods == nil {
		return "no Pod reader configured"
	}
	if err := InvestigateGap(ctx, a.Pods, e, snap); err != nil {
		return err.Error()
	}
	parts := make([]string, 0, len(e.Investigation))
	for i, d := range e.Investigation {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more nodes", len(e.Investigation)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s: %s %s", d.Node, d.State, d.Reason))
	}
	return strings.Join(parts, "; ")
}

// violations summarises the deny and warn findings on a live object, "" for none.
func violations(fs []policy.Finding) string {
	var parts []string
	for _, f := range fs {
		if f.Action == policy.ActionDeny || f.Action == policy.ActionWarn {
			parts = append(parts, f.RuleID+": "+f.Message)
		}
	}
	return strings.Join(parts, "; ")
}

func (a *Auditor) event(ds *appsv1.DaemonSet, eventType, reason, format string, args ...any) {
	if a.Recorder == nil {
		return
	}
	note := fmt.Sprintf(format, args...)
	// The events API caps a note at 1 KiB.
	if len(note) > 1000 {
		note = note[:997] + "..."
	}
	a.Recorder.Eventf(ds, nil, eventType, reason, "Audit", "%s", note)
}

// newlySkippedNamed is how many of the newly skipped nodes an Event names.
const newlySkippedNamed = 10

// describeNewlySkipped names the first of the count newly skipped nodes with
// the reason of the gap skipping each.
func describeNewlySkipped(count int, first []coverage.NewSkip, gaps []coverage.Skip) string {
	parts := make([]string, 0, len(first)+1)
	for _, n := range first {
		parts = append(parts, n.Name+" ("+gaps[n.Skip].Reason()+")")
	}
	if count > len(first) {
		parts = append(parts, fmt.Sprintf("and %d more", count-len(first)))
	}
	return strings.Join(parts, ", ")
}

func (a *Auditor) record(e *Entry) {
	m := a.Metrics
	if m == nil {
		return
	}
	var r gaugeRecord
	for _, s := range e.Coverage.Skips {
		reason := string(s.Kind)
		switch {
		case s.Kind == coverage.SkipTaint && s.Transient:
			reason = "transient-taint"
		case s.Kind == coverage.SkipTaint && e.Intended != "":
			// Declared with coverage.dsguard.io/intended: kept apart
			// so that alerts on reason="taint" see only real gaps.
			reason = "intended-taint"
		}
		if i := slices.Index(uncoveredReasons[:], reason); i >= 0 {
			r.uncovered[i] += int32(s.Count)
		}
	}
	r.eligible = int32(e.Coverage.Eligible)
	st := &e.DaemonSet.Status
	r.counters = [len(statusCounters)]int32{st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberReady, st.UpdatedNumberScheduled,
		st.NumberAvailable, st.NumberMisscheduled}
	r.state = slices.Index(auditStates, e.Status.State)
	m.daemonSets.set(types.NamespacedName{Namespace: e.DaemonSet.Namespace, Name: e.DaemonSet.Name}, r)
}

// beginTerm starts a term as leader with nothing remembered: Start runs
// again each time the replica wins the lease back.
func (a *Auditor) beginTerm() {
	a.seen = map[types.NamespacedName]*auditMemory{}
	a.gapClock = GapClock{}
	a.exemptions = exemptionTally{}
	if a.Metrics != nil {
		a.exemptions.gauge = a.Metrics.Exemptions
		a.Metrics.Running.Set(1)
	}
	a.quiet = map[types.NamespacedName]bool{}
	a.fitCluster = nil
}

// endTerm drops the per-DaemonSet gauges when the lease is lost: a former
// leader would otherwise go on exporting what it last saw next to the new
// leader's figures, and on winning the lease back its fresh exemption
// tally would add to the old counts.
func (a *Auditor) endTerm() {
	if a.Metrics == nil {
		return
	}
	a.Metrics.daemonSets.reset()
	a.Metrics.Exemptions.Reset()
	a.Metrics.Running.Set(0)
}

func (a *Auditor) forget(key types.NamespacedName) {
	if a.Metrics == nil {
		return
	}
	a.exemptions.forget(key)
	a.Metrics.daemonSets.forget(key)
}

// notify sends without blocking; one pending notification is enough.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// others lists the DaemonSets an audited one is compared with; nil when the
// cache cannot list them.
func (a *Auditor) others(ctx context.Context) []*appsv1.DaemonSet {
	list := a.daemonSets
	if a.Others != nil {
		list = a.Others
	}
	dss, err := list(ctx)
	if err != nil {
		a.Log.Error(err, "listing DaemonSets to compare with")
	}
	return dss
}
