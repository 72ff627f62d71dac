package webhook

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/dsguard/dsguard/policy"
)

// CoverageWatcher re-predicts the coverage of every DaemonSet when nodes join,
// leave or change, and when a DaemonSet changes. It emits a Warning Event on a
// DaemonSet whose coverage got worse and keeps the uncovered-nodes gauge
// current. Only the leader replica runs it, so Events are not duplicated.
type CoverageWatcher struct {
	Cache        cache.Cache
	Nodes        *NodeView
	Recorder     events.EventRecorder
	Log          logr.Logger
	Metrics      *CoverageMetrics
	OwnNamespace string

	// gaps remembers, per DaemonSet, the nodes it skipped for reasons that
	// count (untolerated, non-transient taints), to tell "got worse".
	gaps map[types.NamespacedName]map[string]string
}

// CoverageMetrics are the per-DaemonSet coverage gauges. Labels are
// namespace, DaemonSet and reason: bounded by the number of DaemonSets, never
// by nodes.
type CoverageMetrics struct {
	Uncovered *prometheus.GaugeVec
	Eligible  *prometheus.GaugeVec
}

// NewCoverageMetrics creates and registers the coverage gauges.
func NewCoverageMetrics(reg prometheus.Registerer) *CoverageMetrics {
	m := &CoverageMetrics{
		Uncovered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dsguard_daemonset_uncovered_nodes",
			Help: "Nodes a DaemonSet is predicted to skip, by reason (taint, transient-taint, selector, os-arch, nodeName).",
		}, []string{"namespace", "daemonset", "reason"}),
		Eligible: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dsguard_daemonset_predicted_nodes",
			Help: "Nodes a DaemonSet is predicted to run on (what desiredNumberScheduled will be).",
		}, []string{"namespace", "daemonset"}),
	}
	reg.MustRegister(m.Uncovered, m.Eligible)
	return m
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (w *CoverageWatcher) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable.
func (w *CoverageWatcher) Start(ctx context.Context) error {
	w.gaps = map[types.NamespacedName]map[string]string{}
	dsChanged, err := watchChanges(ctx, w.Cache, &appsv1.DaemonSet{})
	if err != nil {
		return fmt.Errorf("DaemonSet informer: %w", err)
	}
	nodesChanged := w.Nodes.Subscribe()
	if !w.Cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-nodesChanged:
		case <-dsChanged:
			// DaemonSet status updates arrive often; settle briefly.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
		}
		if err := w.evaluate(ctx); err != nil {
			w.Log.Error(err, "re-evaluating coverage")
		}
	}
}

func (w *CoverageWatcher) evaluate(ctx context.Context) error {
	snap := w.Nodes.Snapshot()
	if snap == nil {
		return nil
	}
	var list appsv1.DaemonSetList
	if err := w.Cache.List(ctx, &list); err != nil {
		return err
	}
	seen := make(map[types.NamespacedName]bool, len(list.Items))
	for i := range list.Items {
		ds := &list.Items[i]
		if ds.Namespace == w.OwnNamespace || ds.DeletionTimestamp != nil {
			continue
		}
		key := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}
		seen[key] = true
		cov := policy.PredictCoverage(ds, snap)
		w.record(ds, &cov)
		now := countedGaps(&cov)
		before, known := w.gaps[key]
		w.gaps[key] = now
		if _, intended := ds.Annotations[policy.IntendedCoverageAnnotation]; intended || !known {
			continue
		}
		if added := newlySkipped(before, now); len(added) > 0 && w.Recorder != nil {
			w.Recorder.Eventf(ds, nil, corev1.EventTypeWarning, "CoverageReduced", "PredictCoverage",
				"now skips %d of %d nodes; newly skipped: %s", len(now), cov.Total, describeNewlySkipped(added, now))
		}
	}
	for key := range w.gaps {
		if !seen[key] {
			delete(w.gaps, key)
			if w.Metrics != nil {
				w.Metrics.Uncovered.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "daemonset": key.Name})
				w.Metrics.Eligible.DeleteLabelValues(key.Namespace, key.Name)
			}
		}
	}
	return nil
}

// countedGaps maps each node skipped for an untolerated, non-transient taint
// to the taint. Transient taints (a node joining) never raise an Event.
func countedGaps(cov *policy.Coverage) map[string]string {
	out := map[string]string{}
	for _, s := range cov.Skips {
		if s.Kind != policy.SkipTaint || s.Transient {
			continue
		}
		for _, n := range s.Nodes {
			out[n] = s.Reason()
		}
	}
	return out
}

func newlySkipped(before, now map[string]string) []string {
	var out []string
	for n := range now {
		if _, was := before[n]; !was {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func describeNewlySkipped(nodes []string, reasons map[string]string) string {
	parts := make([]string, 0, len(nodes))
	for i, n := range nodes {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(nodes)-i))
			break
		}
		parts = append(parts, n+" ("+reasons[n]+")")
	}
	return strings.Join(parts, ", ")
}

func (w *CoverageWatcher) record(ds *appsv1.DaemonSet, cov *policy.Coverage) {
	if w.Metrics == nil {
		return
	}
	counts := map[string]int{"taint": 0, "transient-taint": 0, "selector": 0, "os-arch": 0, "nodeName": 0}
	for _, s := range cov.Skips {
		reason := string(s.Kind)
		if s.Kind == policy.SkipTaint && s.Transient {
			reason = "transient-taint"
		}
		counts[reason] += len(s.Nodes)
	}
	for reason, n := range counts {
		w.Metrics.Uncovered.WithLabelValues(ds.Namespace, ds.Name, reason).Set(float64(n))
	}
	w.Metrics.Eligible.WithLabelValues(ds.Namespace, ds.Name).Set(float64(cov.Eligible))
}
