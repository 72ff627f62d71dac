package coverage

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestObserveReadyTimes(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pod := func(created time.Time, ready corev1.ConditionStatus, readyAt time.Time, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(readyAt)}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: readyAt}
		}
		return p
	}
	cases := []struct {
		name string
		pods []corev1.Pod
		want *ReadyTimes
	}{
		{"none", nil, nil},
		{"only unready, deleting or clock-skewed Pods", []corev1.Pod{
			pod(t0, corev1.ConditionFalse, t0.Add(5*time.Second), false),
			pod(t0, corev1.ConditionTrue, t0.Add(5*time.Second), true),
			pod(t0, corev1.ConditionTrue, t0.Add(-time.Second), false),
		}, nil},
		{"the median of the ready ones", []corev1.Pod{
			pod(t0, corev1.ConditionTrue, t0.Add(4*time.Second), false),
			pod(t0, corev1.ConditionTrue, t0.Add(90*time.Second), false), // went unready later and back: an outlier
			pod(t0, corev1.ConditionTrue, t0.Add(5*time.Second), false),
			pod(t0, corev1.ConditionFalse, t0.Add(5*time.Second), false),
		}, &ReadyTimes{Median: 5 * time.Second, Pods: 3}},
	}
	for _, tc := range cases {
		got := ObserveReadyTimes(tc.pods)
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
