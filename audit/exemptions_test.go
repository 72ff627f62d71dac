package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// TestAuditor_ExemptionsAreVisible: an active exemption raises an Exempted
// Event once, counts in dsguard_exemptions_active by rule and namespace, and
// shows in the OpenReports result of the exempted finding.
func TestAuditor_ExemptionsAreVisible(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ds := auditDS("agent", 1, 1)
	ds.Namespace = "team-a"
	ds.Annotations = map[string]string{
		policy.ExemptionAnnotationPrefix + "control-plane-toleration": "managed control plane; expires=2026-12-31",
	}
	entries := Run(Input{DaemonSets: []*appsv1.DaemonSet{ds}, Policy: rules.Builtin().Default(), Now: now})
	e := &entries[0]
	if len(e.Exemptions) != 1 || e.Exemptions[0].Rule != "control-plane-toleration" {
		t.Fatalf("exemptions = %v, want control-plane-toleration", e.Exemptions)
	}

	recorder := events.NewFakeRecorder(10)
	m := NewMetrics(prometheus.NewRegistry())
	a := &Auditor{Recorder: recorder, Metrics: m, seen: map[types.NamespacedName]*auditMemory{},
		exemptions: exemptionTally{gauge: m.Exemptions}}
	mem := &auditMemory{}
	a.observeExemptions(e, mem, false)
	a.observeExemptions(e, mem, false) // unchanged: no second Event
	select {
	case ev := <-recorder.Events:
		if !strings.Contains(ev, "Normal Exempted exempted from control-plane-toleration until 2026-12-31: managed control plane") {
			t.Errorf("event = %q", ev)
		}
	default:
		t.Error("no Exempted Event")
	}
	if len(recorder.Events) != 0 {
		t.Errorf("an unchanged exemption raised another Event: %q", <-recorder.Events)
	}
	if v := testutil.ToFloat64(m.Exemptions.WithLabelValues("control-plane-toleration", "team-a")); v != 1 {
		t.Errorf("dsguard_exemptions_active = %v, want 1", v)
	}
	a.exemptions.forget(e.Key())
	if v := testutil.ToFloat64(m.Exemptions.WithLabelValues("control-plane-toleration", "team-a")); v != 0 {
		t.Errorf("after the DaemonSet is gone: dsguard_exemptions_active = %v, want 0", v)
	}

	// The exempted finding's report result says who, why and until when.
	ds.Spec.Template.Spec.Tolerations = nil
	e.Findings = policy.Evaluate(ds, policy.Env{Policy: rules.Builtin().Default(), Now: now})
	var found bool
	for _, r := range entryResults(e) {
		if r.Rule == "control-plane-toleration" {
			found = true
			if r.Result != "skip" || r.Properties["exempted"] != "managed control plane" || r.Properties["exemptionExpires"] != "2026-12-31" {
				t.Errorf("report result = %s %v", r.Result, r.Properties)
			}
		}
	}
	if !found {
		t.Error("no report result for the exempted rule")
	}
}

// TestAuditor_TermsDoNotAddUp: a replica that loses the lease stops
// exporting its gauges, and one that wins it back counts each exemption once.
func TestAuditor_TermsDoNotAddUp(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ds := auditDS("agent", 2, 2, corev1.Toleration{Operator: corev1.TolerationOpExists})
	ds.Namespace = "team-a"
	ds.Annotations = map[string]string{
		policy.ExemptionAnnotationPrefix + "control-plane-toleration": "managed control plane; expires=2026-12-31",
	}
	m := NewMetrics(prometheus.NewRegistry())
	a := &Auditor{Recorder: events.NewFakeRecorder(10), Metrics: m}
	term := func() {
		a.beginTerm()
		e := Run(Input{DaemonSets: []*appsv1.DaemonSet{ds}, Policy: rules.Builtin().Default(), Now: now})[0]
		a.observeExemptions(&e, &auditMemory{}, true)
	}
	term()
	if v := testutil.ToFloat64(m.Running); v != 1 {
		t.Errorf("while auditing: dsguard_auditor_running = %v, want 1", v)
	}
	a.endTerm()
	if n := testutil.CollectAndCount(m.Exemptions); n != 0 {
		t.Errorf("after losing the lease: %d dsguard_exemptions_active series, want none", n)
	}
	if v := testutil.ToFloat64(m.Running); v != 0 {
		t.Errorf("after losing the lease: dsguard_auditor_running = %v, want 0", v)
	}
	term()
	if v := testutil.ToFloat64(m.Exemptions.WithLabelValues("control-plane-toleration", "team-a")); v != 1 {
		t.Errorf("second term: dsguard_exemptions_active = %v, want 1", v)
	}
}
