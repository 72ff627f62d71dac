package audit

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/go-logr/logr"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/policy"
)

// ReportName is the name of the OpenReports Report dsguard keeps in each
// namespace that has DaemonSets.
const ReportName = "dsguard-daemonset-coverage"

const reportSource = "dsguard"

var reportGroupKind = schema.GroupKind{Group: openreportsv1alpha1.GroupName, Kind: "Report"}

// ReportWriter publishes the audit as OpenReports Reports (openreports.io,
// the successor of the wg-policy PolicyReport), one per namespace, when that
// CRD is installed; without it, it stays quiet and checks again later.
type ReportWriter struct {
	// Client writes Reports; Reader reads them uncached (no informer on
	// Reports, which may not even exist).
	Client client.Client
	Reader client.Reader
	Mapper meta.RESTMapper
	Log    logr.Logger
	// Recheck is how often to look for the CRD again while it is absent.
	Recheck time.Duration

	checkedAt time.Time
	installed bool
	written   map[string]bool // namespaces holding a Report of ours
}

// Write publishes one Report per namespace of entries and deletes the ones
// of namespaces that no longer have DaemonSets.
func (w *ReportWriter) Write(ctx context.Context, entries []Entry, now time.Time) {
	if !w.crdInstalled(now) {
		return
	}
	if w.written == nil {
		w.written = map[string]bool{}
	}
	byNamespace := map[string][]*Entry{}
	for i := range entries {
		ns := entries[i].DaemonSet.Namespace
		byNamespace[ns] = append(byNamespace[ns], &entries[i])
	}
	for ns, es := range byNamespace {
		if err := w.upsert(ctx, buildReport(ns, es, now)); err != nil {
			if meta.IsNoMatchError(err) {
				w.installed = false // the CRD went away
				return
			}
			w.Log.Error(err, "writing the OpenReports Report", "namespace", ns)
			continue
		}
		w.written[ns] = true
	}
	for ns := range w.written {
		if _, ok := byNamespace[ns]; ok {
			continue
		}
		stale := &openreportsv1alpha1.Report{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReportName}}
		if err := w.Client.Delete(ctx, stale); err != nil && !apierrors.IsNotFound(err) {
			w.Log.Error(err, "deleting a stale OpenReports Report", "namespace", ns)
			continue
		}
		delete(w.written, ns)
	}
}

func (w *ReportWriter) crdInstalled(now time.Time) bool {
	if w.installed {
		return true
	}
	if !w.checkedAt.IsZero() && now.Sub(w.checkedAt) < w.Recheck {
		return false
	}
	w.checkedAt = now
	_, err := w.Mapper.RESTMapping(reportGroupKind, openreportsv1alpha1.GroupVersion.Version)
	w.installed = err == nil
	if w.installed {
		w.Log.Info("OpenReports CRD found: publishing audit reports")
	}
	return w.installed
}

func (w *ReportWriter) upsert(ctx context.Context, want *openreportsv1alpha1.Report) error {
	var cur openreportsv1alpha1.Report
	err := w.Reader.Get(ctx, types.NamespacedName{Namespace: want.Namespace, Name: want.Name}, &cur)
	if apierrors.IsNotFound(err) {
		return w.Client.Create(ctx, want)
	}
	if err != nil {
		return err
	}
	// Timestamps change on every pass; rewrite only when a result changed.
	if sameResults(cur.Results, want.Results) && cur.Summary == want.Summary {
		return nil
	}
	cur.Labels = want.Labels
	cur.Source, cur.Summary, cur.Results = want.Source, want.Summary, want.Results
	return w.Client.Update(ctx, &cur)
}

func sameResults(a, b []openreportsv1alpha1.ReportResult) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.Timestamp, y.Timestamp = metav1.Timestamp{}, metav1.Timestamp{}
		if !equality.Semantic.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// buildReport turns one namespace's audit into a Report: per DaemonSet, one
// "coverage" result from its status and predicted coverage, and one result per
// policy finding.
func buildReport(ns string, entries []*Entry, now time.Time) *openreportsv1alpha1.Report {
	r := &openreportsv1alpha1.Report{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReportName,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "dsguard"}},
		Source: reportSource,
	}
	ts := metav1.Timestamp{Seconds: now.Unix()}
	for _, e := range entries {
		subject := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "DaemonSet", Namespace: ns,
			Name: e.DaemonSet.Name, UID: e.DaemonSet.UID}
		cov := openreportsv1alpha1.ReportResult{
			Source: reportSource, Policy: "daemonset-coverage", Rule: "status", Category: "coverage",
			Timestamp: ts, Result: "pass", Subjects: []corev1.ObjectReference{subject},
			Description: e.Status.Reason,
			Properties: map[string]string{"state": string(e.Status.State), "skippedNodes": fmt.Sprint(e.Skipped),
				"predictedNodes": fmt.Sprint(e.Coverage.Eligible)},
		}
		if e.HasGap() {
			cov.Result, cov.Severity = "fail", "high"
			if e.Skipped > 0 && !e.Status.HasGap() {
				cov.Description = fmt.Sprintf("%d nodes skipped for untolerated taints", e.Skipped)
			}
		}
		r.Results = append(r.Results, cov)
		for _, f := range e.Findings {
			res := openreportsv1alpha1.ReportResult{
				Source: reportSource, Policy: "dsguard-policy", Rule: f.RuleID, Category: "coverage",
				Timestamp: ts, Subjects: []corev1.ObjectReference{subject}, Description: f.Message,
				Properties: map[string]string{"field": f.FieldString(), "action": string(f.Action)},
			}
			switch f.Action {
			case policy.ActionDeny:
				res.Result, res.Severity = "fail", "high"
			case policy.ActionWarn:
				res.Result, res.Severity = "warn", "medium"
			default:
				res.Result = "skip" // audit level or exempted: recorded, not judged
			}
			r.Results = append(r.Results, res)
		}
	}
	sort.SliceStable(r.Results, func(i, j int) bool {
		return r.Results[i].Subjects[0].Name < r.Results[j].Subjects[0].Name
	})
	for _, res := range r.Results {
		switch res.Result {
		case "pass":
			r.Summary.Pass++
		case "fail":
			r.Summary.Fail++
		case "warn":
			r.Summary.Warn++
		case "skip":
			r.Summary.Skip++
		}
	}
	return r
}
