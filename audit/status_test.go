package audit

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAssessStatus(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	status := func(desired, current, ready, updated, available, misscheduled int32) appsv1.DaemonSetStatus {
		return appsv1.DaemonSetStatus{DesiredNumberScheduled: desired, CurrentNumberScheduled: current,
			NumberReady: ready, UpdatedNumberScheduled: updated, NumberAvailable: available,
			NumberMisscheduled: misscheduled, ObservedGeneration: 3}
	}
	ds := func(st appsv1.DaemonSetStatus, mutate ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Status: st}
		d.Spec.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
		for _, m := range mutate {
			m(d)
		}
		return d
	}
	onDelete := func(d *appsv1.DaemonSet) { d.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType }
	newGeneration := func(d *appsv1.DaemonSet) { d.Generation = 4 }
	tests := []struct {
		name     string
		ds       *appsv1.DaemonSet
		gapSince time.Time
		state    StatusState
		reason   string
		gap      int32
		hasGap   bool
	}{
		{"healthy", ds(status(5, 5, 5, 5, 5, 0)), time.Time{}, StateHealthy, "5 of 5 nodes covered", 0, false},
		{"zero nodes is healthy", ds(status(0, 0, 0, 0, 0, 0)), time.Time{}, StateHealthy, "0 of 0 nodes covered", 0, false},
		{"rolling out, ready dips", ds(status(5, 5, 4, 2, 4, 0)), time.Time{}, StateRollingOut, "2 of 5 Pods updated", 1, false},
		{"on delete, waiting for manual deletes", ds(status(5, 5, 5, 3, 5, 0), onDelete), time.Time{}, StateAwaitingManualDelete,
			"OnDelete: 2 of 5 Pods run an old template until deleted by hand", 0, false},
		{"gap", ds(status(5, 5, 3, 5, 3, 0)), time.Time{}, StateCoverageGap, "2 of 5 nodes without a ready Pod", 2, true},
		{"gap not yet persistent", ds(status(5, 5, 3, 5, 3, 0)), now.Add(-4 * time.Minute), StateCoverageGap, "2 of 5 nodes without a ready Pod", 2, true},
		{"gap persistent after the window", ds(status(5, 5, 3, 5, 3, 0)), now.Add(-6 * time.Minute), StatePersistentGap,
			"2 of 5 nodes without a ready Pod for 6m0s", 2, true},
		{"persistent gap outranks a stuck rollout", ds(status(5, 5, 3, 2, 3, 0)), now.Add(-time.Hour), StatePersistentGap,
			"2 of 5 nodes without a ready Pod for 1h0m0s", 2, true},
		{"pods not yet created", ds(status(5, 3, 3, 5, 3, 0)), time.Time{}, StateCoverageGap, "2 of 5 nodes without a ready Pod", 2, true},
		{"misscheduled", ds(status(4, 4, 4, 4, 4, 1)), time.Time{}, StateMisscheduled, "1 Pods run on nodes that no longer qualify", 0, true},
		{"stale counters", ds(status(5, 5, 3, 5, 3, 1), newGeneration), time.Time{}, StateNotObserved,
			"controller has observed generation 3 of 4; counters are stale", 2, false},
		{"ready but not available (minReadySeconds)", ds(status(5, 5, 5, 5, 4, 0)), time.Time{}, StateRollingOut,
			"4 of 5 Pods available (minReadySeconds)", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := AssessStatus(tt.ds, tt.gapSince, now, 5*time.Minute)
			if a.State != tt.state || a.Reason != tt.reason || a.Gap != tt.gap || a.HasGap() != tt.hasGap {
				t.Errorf("got %+v (hasGap %v), want %s %q gap %d hasGap %v", a, a.HasGap(), tt.state, tt.reason, tt.gap, tt.hasGap)
			}
		})
	}
}
