package audit

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// StatusState summarises what a DaemonSet's status counters say about its
// coverage. DaemonSets have no status conditions; the counters are the only
// record, and no single one answers "is every node covered?".
type StatusState string

// The states, in the order Assess reports them when several hold.
const (
	// StateNotObserved: the controller has not caught up with the latest
	// spec (observedGeneration behind), so the counters describe an older one.
	StateNotObserved StatusState = "NotObserved"
	// StateMisscheduled: Pods run on nodes that no longer qualify.
	StateMisscheduled StatusState = "Misscheduled"
	// StatePersistentGap: fewer ready Pods than nodes that should run one,
	// for longer than the window: investigate node by node.
	StatePersistentGap StatusState = "PersistentGap"
	// StateAwaitingManualDelete: OnDelete strategy with Pods of an old
	// template; they change only when someone deletes them.
	StateAwaitingManualDelete StatusState = "AwaitingManualDelete"
	// StateRollingOut: a RollingUpdate is replacing Pods (ready may dip).
	StateRollingOut StatusState = "RollingOut"
	// StateCoverageGap: fewer ready Pods than nodes that should run one.
	StateCoverageGap StatusState = "CoverageGap"
	// StateHealthy: every counter equals desiredNumberScheduled.
	StateHealthy StatusState = "Healthy"
)

// StatusAssessment is the interpretation of one DaemonSet's counters.
type StatusAssessment struct {
	State StatusState
	// Reason says why, in one line.
	Reason string
	// Gap is desiredNumberScheduled minus numberReady (never negative).
	Gap int32
}

// HasGap reports whether the state is one an operator must look at:
// a coverage gap (persistent or not) or misscheduled Pods.
func (a StatusAssessment) HasGap() bool {
	switch a.State {
	case StateCoverageGap, StatePersistentGap, StateMisscheduled:
		return true
	}
	return false
}

// AssessStatus interprets the status counters of ds. gapSince is when the
// current gap (ready < desired) was first seen, zero when unknown; a gap older
// than window is persistent.
func AssessStatus(ds *appsv1.DaemonSet, gapSince, now time.Time, window time.Duration) StatusAssessment {
	st := &ds.Status
	gap := st.DesiredNumberScheduled - st.NumberReady
	if gap < 0 {
		gap = 0
	}
	a := StatusAssessment{Gap: gap}
	switch {
	case st.ObservedGeneration < ds.Generation:
		a.State = StateNotObserved
		a.Reason = fmt.Sprintf("controller has observed generation %d of %d; counters are stale", st.ObservedGeneration, ds.Generation)
	case st.NumberMisscheduled > 0:
		a.State = StateMisscheduled
		a.Reason = fmt.Sprintf("%d Pods run on nodes that no longer qualify", st.NumberMisscheduled)
	case gap > 0 && !gapSince.IsZero() && now.Sub(gapSince) >= window:
		a.State = StatePersistentGap
		a.Reason = fmt.Sprintf("%d of %d nodes without a ready Pod for %s", gap, st.DesiredNumberScheduled,
			now.Sub(gapSince).Round(time.Second))
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled && ds.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType:
		a.State = StateAwaitingManualDelete
		a.Reason = fmt.Sprintf("OnDelete: %d of %d Pods run an old template until deleted by hand",
			st.DesiredNumberScheduled-st.UpdatedNumberScheduled, st.DesiredNumberScheduled)
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
		a.State = StateRollingOut
		a.Reason = fmt.Sprintf("%d of %d Pods updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)
	case gap > 0 || st.CurrentNumberScheduled < st.DesiredNumberScheduled:
		a.State = StateCoverageGap
		a.Reason = fmt.Sprintf("%d of %d nodes without a ready Pod", max(gap, st.DesiredNumberScheduled-st.CurrentNumberScheduled),
			st.DesiredNumberScheduled)
	case st.NumberAvailable < st.DesiredNumberScheduled:
		// Ready but not yet available for minReadySeconds.
		a.State = StateRollingOut
		a.Reason = fmt.Sprintf("%d of %d Pods available (minReadySeconds)", st.NumberAvailable, st.DesiredNumberScheduled)
	default:
		a.State = StateHealthy
		a.Reason = fmt.Sprintf("%d of %d nodes covered", st.NumberReady, st.DesiredNumberScheduled)
	}
	return a
}
