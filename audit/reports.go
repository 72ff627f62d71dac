package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
// CRD is installed; without it, it stays quiet and checks again later. It
// keeps each DaemonSet's latest results and what it last wrote in memory, so
// a Report is written only when its content changes, with no read of the
// API server except once per namespace before its first write.
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
	// results holds each DaemonSet's results (without timestamps) by
	// namespace and name; dirty the namespaces changed since their write.
	results map[string]map[string][]openreportsv1alpha1.ReportResult
	dirty   map[string]bool
	// written is each namespace's Report as last written or read; a
	// namespace missing here is read before it is written.
	written map[string]*openreportsv1alpha1.Report
}

// Set records the audit of one DaemonSet for its namespace's Report.
func (w *ReportWriter) Set(e *Entry) {
	if w.results == nil {
		w.results = map[string]map[string][]openreportsv1alpha1.ReportResult{}
		w.dirty = map[string]bool{}
	}
	ns, name := e.DaemonSet.Namespace, e.DaemonSet.Name
	res := entryResults(e)
	byName, ok := w.results[ns]
	if !ok {
		byName = map[string][]openreportsv1alpha1.ReportResult{}
		w.results[ns] = byName
	}
	if old, ok := byName[name]; ok && equality.Semantic.DeepEqual(old, res) {
		return
	}
	byName[name] = res
	w.dirty[ns] = true
}

// Remove forgets a DaemonSet that is gone.
func (w *ReportWriter) Remove(key types.NamespacedName) {
	if _, ok := w.results[key.Namespace][key.Name]; !ok {
		return
	}
	delete(w.results[key.Namespace], key.Name)
	if len(w.results[key.Namespace]) == 0 {
		delete(w.results, key.Namespace)
	}
	w.dirty[key.Namespace] = true
}

// Flush writes the Reports of the namespaces whose results changed, and
// deletes those of namespaces that no longer have DaemonSets. A namespace
// whose write fails stays due for the next Flush.
func (w *ReportWriter) Flush(ctx context.Context, now time.Time) {
	wasInstalled := w.installed
	if !w.crdInstalled(now) {
		return
	}
	if w.written == nil || !wasInstalled {
		// Installed just now (or again): every namespace is due, and
		// nothing is known of what the cluster holds.
		w.written = map[string]*openreportsv1alpha1.Report{}
		if w.dirty == nil {
			w.dirty = map[string]bool{}
		}
		for ns := range w.results {
			w.dirty[ns] = true
		}
	}
	for ns := range w.dirty {
		var err error
		if byName, ok := w.results[ns]; ok {
			err = w.upsert(ctx, buildReport(ns, byName, now))
		} else {
			err = w.deleteReport(ctx, ns)
		}
		if meta.IsNoMatchError(err) {
			w.installed = false // the CRD went away
			return
		}
		if err != nil {
			w.Log.Error(err, "writing the OpenReports Report", "namespace", ns)
			delete(w.written, ns) // read it again before the next write
			continue
		}
		delete(w.dirty, ns)
	}
}

func (w *ReportWriter) deleteReport(ctx context.Context, ns string) error {
	if _, ok := w.written[ns]; !ok {
		return nil // never written by this writer
	}
	stale := &openreportsv1alpha1.Report{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReportName}}
	if err := w.Client.Delete(ctx, stale); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	delete(w.written, ns)
	return nil
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
	cur, known := w.written[want.Namespace]
	if !known {
		var got openreportsv1alpha1.Report
		err := w.Reader.Get(ctx, types.NamespacedName{Namespace: want.Namespace, Name: want.Name}, &got)
		if apierrors.IsNotFound(err) {
			if err := w.Client.Create(ctx, want); err != nil {
				return err
			}
			w.written[want.Namespace] = want
			return nil
		}
		if err != nil {
			return err
		}
		cur = &got
		w.written[want.Namespace] = cur
	}
	// Timestamps change on every pass; rewrite only when a result changed.
	if sameResults(cur.Results, want.Results) && cur.Summary == want.Summary {
		return nil
	}
	next := cur.DeepCopy()
	next.Labels = want.Labels
	next.Source, next.Summary, next.Results = want.Source, want.Summary, want.Results
	if err := w.Client.Update(ctx, next); err != nil {
		return err
	}
	w.written[want.Namespace] = next
	return nil
}

// entryResults are one DaemonSet's results, without timestamps: one
// "coverage" result from its status and predicted coverage, and one result
// per policy finding.
func entryResults(e *Entry) []openreportsv1alpha1.ReportResult {
	subject := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "DaemonSet", Namespace: e.DaemonSet.Namespace,
		Name: e.DaemonSet.Name, UID: e.DaemonSet.UID}
	cov := openreportsv1alpha1.ReportResult{
		Source: reportSource, Policy: "daemonset-coverage", Rule: "status", Category: "coverage",
		Result: "pass", Subjects: []corev1.ObjectReference{subject},
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
	out := []openreportsv1alpha1.ReportResult{cov}
	for _, f := range e.Findings {
		res := openreportsv1alpha1.ReportResult{
			Source: reportSource, Policy: "dsguard-policy", Rule: f.RuleID, Category: "coverage",
			Subjects: []corev1.ObjectReference{subject}, Description: f.Message,
			Properties: map[string]string{"field": f.FieldString(), "action": string(f.Action)},
		}
		if f.Exempted != "" {
			// Exempted findings are recorded, not judged; the report says
			// who decided that, why and until when.
			res.Properties["exempted"] = f.Exempted
			if day := (policy.Exemption{Expires: f.ExemptionExpires}).LastDay(); day != "" {
				res.Properties["exemptionExpires"] = day
			}
		}
		switch f.Action {
		case policy.ActionDeny:
			res.Result, res.Severity = "fail", "high"
		case policy.ActionWarn:
			res.Result, res.Severity = "warn", "medium"
		default:
			res.Result = "skip" // audit level or exempted: recorded, not judged
		}
		out = append(out, res)
	}
	return out
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

// buildReport turns one namespace's results into a Report, DaemonSets in
// name order, every result stamped with now.
func buildReport(ns string, byName map[string][]openreportsv1alpha1.ReportResult, now time.Time) *openreportsv1alpha1.Report {
	r := &openreportsv1alpha1.Report{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReportName,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "dsguard"}},
		Source: reportSource,
	}
	ts := metav1.Timestamp{Seconds: now.Unix()}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		for _, res := range byName[name] {
			res.Timestamp = ts
			r.Results = append(r.Results, res)
		}
	}
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
