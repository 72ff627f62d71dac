package coverage

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ReadyTimes is how long the agent's Pods took from creation to Ready, as
// their own timestamps tell: what a rollout's next Pods will need, image
// pull, start-up and probes included.
type ReadyTimes struct {
	// Median is the median time from a Pod's creation to its Ready
	// condition's last transition.
	Median time.Duration
	// Pods is how many ready Pods it was taken over.
	Pods int
}

// ObserveReadyTimes measures pods, the Pods of one DaemonSet (a sample will
// do): those ready now, not being deleted, whose Ready transition follows
// their creation. Nil when none is.
func ObserveReadyTimes(pods []corev1.Pod) *ReadyTimes {
	var took []time.Duration
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if c := condition(p, corev1.PodReady); PodReady(p) && c.LastTransitionTime.After(p.CreationTimestamp.Time) {
			took = append(took, c.LastTransitionTime.Sub(p.CreationTimestamp.Time))
		}
	}
	if len(took) == 0 {
		return nil
	}
	slices.Sort(took)
	return &ReadyTimes{Median: took[len(took)/2], Pods: len(took)}
}
