package audit

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	fcache "k8s.io/client-go/tools/cache/testing"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
	"k8s.io/apimachinery/pkg/api/resource"
	goruntime "runtime"
	"sync/atomic"
)

func TestGaps_IgnoreTransientTaintsAndSelectors(t *testing.T) {
	infra := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	cov := &coverage.Coverage{Total: 6, Eligible: 1, Skips: []coverage.Skip{
		coverage.Skip{Kind: coverage.SkipTaint, Taint: infra}.WithNodes("infra-1", "infra-2"),
		coverage.Skip{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}, Transient: true}.WithNodes("joining-1"),
		coverage.Skip{Kind: coverage.SkipSelector}.WithNodes("gpu-1"),
		coverage.Skip{Kind: coverage.SkipOSArch}.WithNodes("win-1"),
	}}
	before := []coverage.Skip{coverage.Skip{Kind: coverage.SkipTaint, Taint: infra}.WithNodes("infra-1")}
	count, first := coverage.NewlySkipped(before, cov.Gaps(), newlySkippedNamed)
	if d := describeNewlySkipped(count, first, cov.Gaps()); d != "infra-2 (taint dedicated=infra:NoSchedule not tolerated)" {
		t.Errorf("description = %q, want infra-2 only: joining, selected-out and other-OS nodes are no gap", d)
	}
	if count, _ := coverage.NewlySkipped(cov.Gaps(), before, newlySkippedNamed); count != 0 {
		t.Error("fewer skipped nodes is not a reduction of coverage")
	}
}

func TestDescribeNewlySkipped_NamesTenWithTheirReasons(t *testing.T) {
	var gpus []string
	for i := range 12 {
		gpus = append(gpus, fmt.Sprintf("gpu-%02d", i))
	}
	infra := coverage.Skip{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}.WithNodes("infra-1")
	cov := &coverage.Coverage{Skips: []coverage.Skip{infra,
		coverage.Skip{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}.WithNodes(gpus...),
	}}
	count, first := coverage.NewlySkipped([]coverage.Skip{infra}, cov.Gaps(), newlySkippedNamed)
	got := describeNewlySkipped(count, first, cov.Gaps())
	if !strings.HasPrefix(got, "gpu-00 (taint nvidia.com/gpu:NoSchedule not tolerated), ") ||
		!strings.HasSuffix(got, "gpu-09 (taint nvidia.com/gpu:NoSchedule not tolerated), and 2 more") || strings.Contains(got, "infra-1") {
		t.Errorf("description = %q", got)
	}
}

// TestAuditor_QuietFirstPass: a new leader records the state of the
// DaemonSets it finds without Events; changes after that fire as before,
// and a DaemonSet first seen after the election still warns about its gap.
func TestAuditor_QuietFirstPass(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	nodes := coverage.NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-2"}},
	})
	recorder := events.NewFakeRecorder(10)
	a := &Auditor{Recorder: recorder, seen: map[types.NamespacedName]*auditMemory{}}
	audit := func(ds *appsv1.DaemonSet, quiet bool) []string {
		e := Run(Input{DaemonSets: []*appsv1.DaemonSet{ds}, Nodes: nodes, Policy: rules.Builtin().Default(), Now: now})[0]
		a.observe(t.Context(), &e, nodes, quiet)
		var got []string
		for len(recorder.Events) > 0 {
			got = append(got, <-recorder.Events)
		}
		return got
	}
	all := corev1.Toleration{Operator: corev1.TolerationOpExists}
	if got := audit(auditDS("inherited", 2, 1, all), true); len(got) != 0 {
		t.Errorf("first pass after election: Events %q, want none", got)
	}
	if got := audit(auditDS("inherited", 2, 1, all), false); len(got) != 0 {
		t.Errorf("unchanged gap: Events %q, want none", got)
	}
	if got := audit(auditDS("inherited", 2, 2, all), false); len(got) != 1 || !strings.Contains(got[0], "CoverageRestored") {
		t.Errorf("gap closed: Events %q, want one CoverageRestored", got)
	}
	if got := audit(auditDS("new", 2, 1, all), false); len(got) != 1 || !strings.Contains(got[0], "CoverageGap") {
		t.Errorf("a DaemonSet first seen later with a gap: Events %q, want one CoverageGap", got)
	}
}

// TestAuditor_LeavesTheDaemonSetAlone: the auditor reads each DaemonSet from
// the informer cache without a deep copy, so nothing an audit does with it
// (judging, the gap clock, Events, gauges, the investigation of a gap, the
// Report) may change it: a change would be the cache's. The test runs the
// auditor's own audit, twice (a gap, then the same gap past the window), over
// a real node view, a real policy source and a cache that hands out its own
// object as the informer cache does, and checks that the cached DaemonSet is
// unchanged and that nothing wrote to any DaemonSet or its status.
func TestAuditor_LeavesTheDaemonSetAlone(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	nodes := startNodeView(t)
	source := clusterview.NewPolicySource(nil)
	source.UseDefaults("test")

	ds := auditDS("gappy", 3, 1) // skips cp-1, one Pod ready of three
	ds.UID = "gappy-uid"
	ds.Annotations = map[string]string{
		policy.ExemptionAnnotationPrefix + "readiness-probe": "later; expires=2026-12-31",
		policy.IntendedCoverageAnnotation:                    "",
	}
	ds.Spec.Template.Spec.Containers[0].Image = "example/agent:latest"
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpExists}}}}}}}
	before := ds.DeepCopy()

	// Every write the auditor makes (Reports) goes through this client; a
	// write to a DaemonSet, its status included, is recorded.
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, openreportsv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	var dsWrites []string
	written := func(verb string, obj client.Object) {
		if _, isDS := obj.(*appsv1.DaemonSet); isDS {
			dsWrites = append(dsWrites, verb+" "+obj.GetNamespace()+"/"+obj.GetName())
		}
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			written("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			written("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			written("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			dsWrites = append(dsWrites, fmt.Sprintf("apply %T", obj))
			return c.Apply(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			written("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			written("create "+sub, obj)
			return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			written("update "+sub, obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			written("patch "+sub, obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(reportGroupKind.WithVersion(openreportsv1alpha1.GroupVersion.Version), meta.RESTScopeNamespace)

	recorder := events.NewFakeRecorder(100)
	clock := now
	a := &Auditor{Cache: &sharedCache{objects: map[types.NamespacedName]*appsv1.DaemonSet{{Namespace: ds.Namespace, Name: ds.Name}: ds}},
		Pods: cl, Nodes: nodes, Source: source, Recorder: recorder, Log: logr.Discard(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Window: 5 * time.Minute,
		Reports: &ReportWriter{Client: cl, Reader: cl, Mapper: mapper, Log: logr.Discard()},
		Now:     func() time.Time { return clock }}
	a.beginTerm()
	key := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}
	// A gap, and the same gap past the window.
	for range 2 {
		if err := a.audit(t.Context(), key); err != nil {
			t.Fatalf("audit: %v", err)
		}
		a.flushReports(t.Context())
		clock = clock.Add(10 * time.Minute)
	}
	var got []string
	for len(recorder.Events) > 0 {
		got = append(got, strings.Fields(<-recorder.Events)[1])
	}
	if want := []string{"Exempted", "CoverageGap", "PolicyViolation", "PersistentGap"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Events %q, want %q: the audit did not take the paths this test is for", got, want)
	}
	var report openreportsv1alpha1.Report
	if err := cl.Get(t.Context(), types.NamespacedName{Namespace: ds.Namespace, Name: ReportName}, &report); err != nil {
		t.Errorf("the audit wrote no Report (%v): it did not take the path this test is for", err)
	}
	if !reflect.DeepEqual(ds, before) {
		t.Errorf("the audit changed the cached DaemonSet:\nbefore %+v\nafter  %+v", before, ds)
	}
	if len(dsWrites) > 0 {
		t.Errorf("the audit wrote to a DaemonSet: %q", dsWrites)
	}
}

// startNodeView runs a node view of cp-1 (control plane) and two workers of
// pool a until the test ends.
func startNodeView(t *testing.T) *clusterview.NodeView {
	t.Helper()
	nodes, _ := startNodeViewOf(t)
	return nodes
}

// startNodeViewOf is startNodeView with the source of its nodes, to change
// them.
func startNodeViewOf(t *testing.T) (*clusterview.NodeView, *fcache.FakeControllerSource) {
	t.Helper()
	nodeSource := fcache.NewFakeControllerSource()
	t.Cleanup(nodeSource.Shutdown)
	nodeSource.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}})
	nodeSource.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"pool": "a"}}})
	nodeSource.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-2", Labels: map[string]string{"pool": "a"}}})
	nodes := &clusterview.NodeView{Nodes: nodeSource, Log: logr.Discard()}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- nodes.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	select {
	case <-nodes.Built():
	case <-time.After(10 * time.Second):
		t.Fatal("the node view did not list the nodes within 10s")
	}
	return nodes, nodeSource
}

// TestAuditor_SkipsAnAuditNothingCanChange: the periodic pass re-audits
// every DaemonSet; one whose inputs (its resourceVersion, the node
// snapshot, the fit cluster, the policy, the other DaemonSets) are those of
// its last audit, with no gap and no annotation that can expire, is not
// judged again. The test changes the cached object's counters without a
// new resourceVersion, which only a real audit would see.
func TestAuditor_SkipsAnAuditNothingCanChange(t *testing.T) {
	nodes := startNodeView(t)
	source := clusterview.NewPolicySource(nil)
	source.UseDefaults("test")
	all := corev1.Toleration{Operator: corev1.TolerationOpExists}
	for _, tc := range []struct {
		name string
		// change makes the second audit's inputs differ, or not.
		change      func(ds *appsv1.DaemonSet, others *[]*appsv1.DaemonSet)
		ready       int32 // of 3, at the first audit
		annotations map[string]string
		skipped     bool
	}{
		{name: "nothing changed", change: func(*appsv1.DaemonSet, *[]*appsv1.DaemonSet) {}, ready: 3, skipped: true},
		{name: "a new resourceVersion", change: func(ds *appsv1.DaemonSet, _ *[]*appsv1.DaemonSet) { ds.ResourceVersion = "2" }, ready: 3},
		{name: "another DaemonSet came", change: func(_ *appsv1.DaemonSet, others *[]*appsv1.DaemonSet) {
			*others = append(slices.Clone(*others), auditDS("other", 3, 3, all))
		}, ready: 3},
		{name: "a gap the window can make persistent", change: func(*appsv1.DaemonSet, *[]*appsv1.DaemonSet) {}, ready: 2},
		{name: "an exemption that can expire", change: func(*appsv1.DaemonSet, *[]*appsv1.DaemonSet) {}, ready: 3,
			annotations: map[string]string{policy.ExemptionAnnotationPrefix + "readiness-probe": "later; expires=2026-12-31"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := auditDS("agent", 3, tc.ready, all)
			ds.ResourceVersion, ds.Annotations = "1", tc.annotations
			others := []*appsv1.DaemonSet{ds}
			clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
			recorder := events.NewFakeRecorder(100)
			a := &Auditor{Cache: &sharedCache{objects: map[types.NamespacedName]*appsv1.DaemonSet{{Namespace: ds.Namespace, Name: ds.Name}: ds}},
				Nodes: nodes, Source: source, Recorder: recorder, Log: logr.Discard(), Window: time.Hour,
				Others: func(context.Context) ([]*appsv1.DaemonSet, error) { return others, nil },
				Now:    func() time.Time { return clock }}
			a.beginTerm()
			key := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}
			if err := a.audit(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			for len(recorder.Events) > 0 {
				<-recorder.Events
			}
			// Counters only a real audit reads: one node fewer ready; and
			// past the gap window.
			ds.Status.NumberReady, ds.Status.NumberAvailable = tc.ready-1, tc.ready-1
			clock = clock.Add(2 * time.Hour)
			tc.change(ds, &others)
			if err := a.audit(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			var got []string
			for len(recorder.Events) > 0 {
				got = append(got, <-recorder.Events)
			}
			if judged := len(got) > 0; judged == tc.skipped {
				t.Errorf("second audit's Events %q: skipped %v, want %v", got, !judged, tc.skipped)
			}
		})
	}
}

// sharedCache serves DaemonSets as the informer cache does: Get and List
// with client.UnsafeDisableDeepCopy hand out shallow copies of the cached
// objects, which share their maps, slices and pointers, so a change made
// through them is a change of the cache's own object; without the option,
// deep copies. The informer side is a fake the audit of one DaemonSet does
// not use.
type sharedCache struct {
	informertest.FakeInformers
	objects map[types.NamespacedName]*appsv1.DaemonSet
}

func (c *sharedCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	out, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return fmt.Errorf("sharedCache holds DaemonSets, not %T", obj)
	}
	cached, ok := c.objects[key]
	if !ok {
		return apierrors.NewNotFound(appsv1.Resource("daemonsets"), key.Name)
	}
	var o client.GetOptions
	o.ApplyOptions(opts)
	if o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy {
		*out = *cached
	} else {
		cached.DeepCopyInto(out)
	}
	return nil
}

func (c *sharedCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	out, ok := list.(*appsv1.DaemonSetList)
	if !ok {
		return fmt.Errorf("sharedCache holds DaemonSets, not %T", list)
	}
	var o client.ListOptions
	o.ApplyOptions(opts)
	out.Items = out.Items[:0]
	for _, cached := range c.objects {
		if o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy {
			out.Items = append(out.Items, *cached)
		} else {
			out.Items = append(out.Items, *cached.DeepCopy())
		}
	}
	return nil
}

// TestAuditor_NewPolicyReauditsAtOnce: a new policy re-audits every
// DaemonSet when it becomes active, not at the next periodic pass (an hour
// away here). The DaemonSet has no readiness probe; the first policy turns
// readiness-probe off, so the first pass finds nothing to say; the defaults
// then warn about it, and only an audit under them emits the Event.
func TestAuditor_NewPolicyReauditsAtOnce(t *testing.T) {
	nodes := startNodeView(t)
	source := clusterview.NewPolicySource(nil)
	if err := source.Load([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  readiness-probe: {action: \"off\"}\n"),
		"test"); err != nil {
		t.Fatal(err)
	}
	ds := auditDS("agent", 3, 3, corev1.Toleration{Operator: corev1.TolerationOpExists})
	ds.Spec.Template.Spec.Containers[0].ReadinessProbe = nil
	reg := prometheus.NewRegistry()
	recorder := events.NewFakeRecorder(100)
	a := loneAuditor(ds, nodes, source, recorder, reg)
	runAuditor(t, a)
	// The first pass has audited the DaemonSet once its gauges are out.
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := testutil.GatherAndCount(reg, "dsguard_daemonset_predicted_nodes"); n == 0; n, _ = testutil.GatherAndCount(reg, "dsguard_daemonset_predicted_nodes") {
		if time.Now().After(deadline) {
			t.Fatal("the first pass did not audit the DaemonSet within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(recorder.Events) > 0 {
		t.Fatalf("the first pass emitted %q; with readiness-probe off there is nothing to say", <-recorder.Events)
	}
	source.UseDefaults("test")
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, "readinessProbe") {
			t.Errorf("Event %q, want the readiness-probe finding", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no Event within 10s of the new policy: the auditor did not re-audit")
	}
}

// TestAuditor_NodeChangesSpaceAudits: a node change after a quiet spell is
// audited at once; a second one right after waits until the spacing since
// the DaemonSet's last audit is over, and is audited then, not lost.
func TestAuditor_NodeChangesSpaceAudits(t *testing.T) {
	nodes, nodeSource := startNodeViewOf(t)
	source := clusterview.NewPolicySource(nil)
	source.UseDefaults("test")
	ds := auditDS("agent", 2, 2) // the workers: no toleration for any taint
	const spacing = 1500 * time.Millisecond
	recorder := events.NewFakeRecorder(100)
	a := loneAuditor(ds, nodes, source, recorder, prometheus.NewRegistry())
	a.NodeChangeSpacing = spacing
	runAuditor(t, a)
	taint := func(name string) time.Time {
		nodeSource.Modify(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/drain", Effect: corev1.TaintEffectNoSchedule}}}})
		return time.Now()
	}
	reduced := func(what string) time.Time {
		deadline := time.After(10 * time.Second)
		for {
			select {
			case e := <-recorder.Events:
				if strings.Contains(e, "CoverageReduced") {
					return time.Now()
				}
			case <-deadline:
				t.Fatalf("no CoverageReduced Event within 10s of %s", what)
			}
		}
	}
	// Past the quiet first pass: the spacing since it is over.
	time.Sleep(spacing + 200*time.Millisecond)
	first := taint("worker-1")
	firstEvent := reduced("the first taint")
	if took := firstEvent.Sub(first); took >= spacing {
		t.Errorf("the first change after a quiet spell took %s to its Event; it should be audited at once", took)
	}
	taint("worker-2")
	if secondEvent := reduced("the second taint"); secondEvent.Sub(first) < spacing {
		t.Errorf("the second change was audited %s after the first; the spacing is %s", secondEvent.Sub(first), spacing)
	}
}

// loneAuditor audits ds alone, with no periodic pass within a test's time.
func loneAuditor(ds *appsv1.DaemonSet, nodes *clusterview.NodeView, source *clusterview.PolicySource,
	recorder events.EventRecorder, reg prometheus.Registerer) *Auditor {
	return &Auditor{Cache: &sharedCache{objects: map[types.NamespacedName]*appsv1.DaemonSet{{Namespace: ds.Namespace, Name: ds.Name}: ds}},
		Nodes: nodes, Source: source, Recorder: recorder, Log: logr.Discard(), Metrics: NewMetrics(reg),
		Interval: time.Hour, Window: time.Hour,
		Others: func(context.Context) ([]*appsv1.DaemonSet, error) { return []*appsv1.DaemonSet{ds}, nil }}
}

// runAuditor runs a's loop until the test ends, and fails the test when it
// stops with an error.
func runAuditor(t *testing.T, a *Auditor) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- a.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("the auditor stopped with %v", err)
		}
	})
}

// TestAuditor_KeepsNoOldInputsAlive: a DaemonSet's memory of its last
// audit tells whether the node snapshot, the fit cluster and the other
// DaemonSets are the same ones again, but keeps none of them alive once
// they are replaced. Held, they were a cluster (and a snapshot) per
// DaemonSet audited at a different moment until its next audit: most of
// the heap at 65,000 nodes under Pod churn.
func TestAuditor_KeepsNoOldInputsAlive(t *testing.T) {
	nodes := startNodeView(t)
	source := clusterview.NewPolicySource(nil)
	source.UseDefaults("test")
	all := corev1.Toleration{Operator: corev1.TolerationOpExists}
	first, second := auditDS("agent", 3, 3, all), auditDS("other", 3, 3, all)
	cluster := func() *fit.Cluster {
		b := fit.NewBuilder()
		b.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}}})
		return b.Build()
	}
	current, others := cluster(), []*appsv1.DaemonSet{first, second}
	a := &Auditor{Cache: &sharedCache{objects: map[types.NamespacedName]*appsv1.DaemonSet{
		{Namespace: first.Namespace, Name: first.Name}: first, {Namespace: second.Namespace, Name: second.Name}: second}},
		Nodes: nodes, Source: source, Recorder: events.NewFakeRecorder(100), Log: logr.Discard(), Window: time.Hour,
		Fit: func() *fit.Cluster { return current }, FitReuse: -1, Now: time.Now,
		Others: func(context.Context) ([]*appsv1.DaemonSet, error) { return others, nil }}
	a.beginTerm()
	audit := func(ds *appsv1.DaemonSet) *auditMemory {
		key := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}
		if err := a.audit(t.Context(), key); err != nil {
			t.Fatal(err)
		}
		return a.seen[key]
	}
	if mem := audit(first); mem == nil || mem.inputs.fit.Value() != current {
		t.Fatal("the audit did not remember its cluster")
	}
	var clusterGone, listGone atomic.Bool
	goruntime.AddCleanup(current, func(b *atomic.Bool) { b.Store(true) }, &clusterGone)
	goruntime.AddCleanup(&others[0], func(b *atomic.Bool) { b.Store(true) }, &listGone)
	// The second DaemonSet is audited with new ones; the first still
	// remembers its audit's.
	current, others = cluster(), slices.Clone(others)
	audit(second)
	// The auditor lives on, as the first DaemonSet's memory does.
	defer goruntime.KeepAlive(a)
	for range 20 {
		if clusterGone.Load() && listGone.Load() {
			return
		}
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("the old cluster was collected: %v, the old list of DaemonSets: %v; a DaemonSet's memory keeps them alive",
		clusterGone.Load(), listGone.Load())
}

// TestAuditor_ReadsOneFitClusterForAWhile: audits in a row read the fit
// cluster they asked for first, until FitReuse is over; a negative FitReuse
// asks at every audit.
func TestAuditor_ReadsOneFitClusterForAWhile(t *testing.T) {
	nodes := startNodeView(t)
	source := clusterview.NewPolicySource(nil)
	source.UseDefaults("test")
	ds := auditDS("agent", 3, 3, corev1.Toleration{Operator: corev1.TolerationOpExists})
	asked := 0
	a := loneAuditor(ds, nodes, source, events.NewFakeRecorder(100), prometheus.NewRegistry())
	a.Fit, a.Now = func() *fit.Cluster { asked++; return fit.NewBuilder().Build() }, time.Now
	a.beginTerm()
	key := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}
	for _, step := range []struct {
		reuse time.Duration
		asked int
	}{{time.Hour, 1}, {time.Hour, 1}, {time.Hour, 1}, {time.Nanosecond, 2}, {-1, 3}, {-1, 4}} {
		a.FitReuse = step.reuse
		ds.ResourceVersion += "1" // a new object: the audit is not skipped
		if err := a.audit(t.Context(), key); err != nil {
			t.Fatal(err)
		}
		if asked != step.asked {
			t.Fatalf("with FitReuse %s the audits asked for the cluster %d times, want %d", step.reuse, asked, step.asked)
		}
	}
}
