package fit

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Resources is a resource vector in the scheduler's units: millicores,
// bytes, and whole units of every scalar resource.
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// Scalar holds extended resources (example.com/gpu), hugepages and
	// the other resources the scheduler checks by name.
	Scalar map[corev1.ResourceName]int64
}

// ResourcesOf converts a resource list the way the scheduler's Resource.Add
// does: cpu, memory and ephemeral-storage by value, scalar resources by
// name, everything else (pods, storage) dropped.
func ResourcesOf(rl corev1.ResourceList) Resources {
	var r Resources
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		default:
			if isScalar(name) {
				if r.Scalar == nil {
					r.Scalar = map[corev1.ResourceName]int64{}
				}
				r.Scalar[name] += q.Value()
			}
		}
	}
	return r
}

// isScalar follows the scheduler's IsScalarResourceName: extended
// resources and prefixed native ones (both carry a slash), hugepages and
// attachable volume counts.
func isScalar(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") || strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(s, corev1.ResourceAttachableVolumesPrefix)
}

// IsZero reports whether nothing is requested, the case in which
// NodeResourcesFit checks only the pods limit.
func (r Resources) IsZero() bool {
	return r.MilliCPU == 0 && r.Memory == 0 && r.EphemeralStorage == 0 && len(r.Scalar) == 0
}

// Equal reports whether r and o are the same vector (a zero scalar entry
// counts as absent).
func (r Resources) Equal(o Resources) bool {
	if r.MilliCPU != o.MilliCPU || r.Memory != o.Memory || r.EphemeralStorage != o.EphemeralStorage {
		return false
	}
	for name, v := range r.Scalar {
		if o.Scalar[name] != v {
			return false
		}
	}
	for name, v := range o.Scalar {
		if r.Scalar[name] != v {
			return false
		}
	}
	return true
}

// Add adds o to r.
func (r *Resources) Add(o Resources) { r.add(o, 1) }

// Sub subtracts o from r.
func (r *Resources) Sub(o Resources) { r.add(o, -1) }

func (r *Resources) add(o Resources, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	r.EphemeralStorage += sign * o.EphemeralStorage
	for name, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[corev1.ResourceName]int64{}
		}
		r.Scalar[name] += sign * v
	}
}

// Clone returns a copy that shares nothing with r.
func (r Resources) Clone() Resources {
	r.Scalar = maps.Clone(r.Scalar)
	return r
}

// PodRequests is the request the scheduler counts for a Pod, from
// k8s.io/component-helpers as kube-scheduler calls it with the v1.37
// default feature gates: pod-level resources honoured, resources the
// kubelet reports in the status counted where they are larger (in-place
// resize), the largest init container, restartable init containers
// (sidecars) summed with the containers, and the Pod's overhead.
func PodRequests(pod *corev1.Pod) Resources { return ResourcesOf(podRequestList(pod)) }

// podRequestList is PodRequests as a resource list.
func podRequestList(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		UseStatusResources: true,
		// InPlacePodLevelResourcesVerticalScaling is beta and on in v1.37.
		InPlacePodLevelResourcesVerticalScalingEnabled: true,
	})
}
