package fit

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SavedPod returns a Pod reduced to what its record (PodOf) reads, for a
// file that dsguard check --nodes reads later (dsguard nodes --fit): name,
// namespace, labels, the controlling DaemonSet, priority, start time,
// phase, node or nominated node, its required anti-affinity terms, and one
// container holding the request the scheduler counts and the host ports
// the Pod holds. No image, command, environment, volume, address or
// status message goes into the file. PodOf(SavedPod(p)) equals PodOf(p).
func SavedPod(pod *corev1.Pod) *corev1.Pod {
	c := corev1.Container{Name: "requests", Resources: corev1.ResourceRequirements{Requests: podRequestList(pod)}}
	for _, p := range HostPorts(&pod.Spec) {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: p.Port, HostPort: p.Port, HostIP: p.HostIP, Protocol: p.Protocol})
	}
	out := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels},
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName, Priority: pod.Spec.Priority,
			Containers: []corev1.Container{c}},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, NominatedNodeName: pod.Status.NominatedNodeName,
			StartTime: pod.Status.StartTime},
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.Kind == "DaemonSet" {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	if terms := RequiredAntiAffinity(&pod.Spec); len(terms) > 0 {
		out.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
	}
	return out
}
