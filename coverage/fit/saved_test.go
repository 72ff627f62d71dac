package fit

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestSavedPod_KeepsTheRecord: the reduced Pod a node set file holds
// yields the same record as the Pod itself, for every part of a Pod the
// scheduler weighs, and keeps nothing else.
func TestSavedPod_KeepsTheRecord(t *testing.T) {
	rl := func(cpu, mem string) corev1.ResourceList {
		out := corev1.ResourceList{}
		if cpu != "" {
			out[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			out[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return out
	}
	start := metav1.Unix(1_700_000_000, 0)
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team", Labels: map[string]string{"app": "web"},
				Annotations: map[string]string{"secret-ish": "x"}},
			Spec: corev1.PodSpec{NodeName: "n1", Priority: ptr.To[int32](1000), ServiceAccountName: "sa",
				Containers: []corev1.Container{{Name: "app", Image: "registry/app:v1", Env: []corev1.EnvVar{{Name: "TOKEN", Value: "s3cr3t"}},
					Resources: corev1.ResourceRequirements{Requests: rl("250m", "128Mi")}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &start, PodIP: "10.0.0.7", HostIP: "192.168.1.2"},
		}
	}
	tests := []struct {
		name   string
		change func(p *corev1.Pod)
	}{
		{"plain", func(*corev1.Pod) {}},
		{"init containers: the largest counts", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "big", Resources: corev1.ResourceRequirements{Requests: rl("2", "1Gi")}}}
		}},
		{"sidecars are summed, and their host ports held", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Resources: corev1.ResourceRequirements{Requests: rl("100m", "64Mi")},
				Ports:     []corev1.ContainerPort{{ContainerPort: 15000, HostPort: 15000, Protocol: corev1.ProtocolUDP, HostIP: "10.1.1.1"}}}}
		}},
		{"overhead and extended resources", func(p *corev1.Pod) {
			p.Spec.Overhead = rl("50m", "20Mi")
			p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("2")
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}},
		{"pod-level resources", func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("1500m", "2Gi")}
		}},
		{"a resize the kubelet reports as larger", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
				Resources: &corev1.ResourceRequirements{Requests: rl("750m", "128Mi")}, AllocatedResources: rl("750m", "128Mi")}}
		}},
		{"hostNetwork: container ports are host ports", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9100}, {ContainerPort: 9101, HostPort: 9101, Protocol: corev1.ProtocolTCP}}
		}},
		{"a DaemonSet's Pod, nominated, with anti-affinity", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ReplicaSet", Name: "other"},
				{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u", Controller: ptr.To(true)}}
			p.Spec.NodeName, p.Status.NominatedNodeName, p.Status.Phase = "", "n2", corev1.PodPending
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: corev1.LabelHostname,
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}}}}}
		}},
		{"no priority, not started", func(p *corev1.Pod) { p.Spec.Priority, p.Status.StartTime = nil, nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := base()
			tt.change(pod)
			want, err := PodOf(pod)
			if err != nil {
				t.Fatal(err)
			}
			saved := SavedPod(pod)
			got, err := PodOf(saved)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("record of the saved Pod\n%+v\nwant\n%+v", got, want)
			}
			if saved.Spec.NodeName != pod.Spec.NodeName || saved.Status.NominatedNodeName != pod.Status.NominatedNodeName ||
				saved.Status.Phase != pod.Status.Phase {
				t.Errorf("saved Pod placed at %q/%q in %s", saved.Spec.NodeName, saved.Status.NominatedNodeName, saved.Status.Phase)
			}
			c := saved.Spec.Containers[0]
			if len(saved.Spec.Containers) != 1 || c.Image != "" || c.Env != nil || saved.Annotations != nil ||
				saved.Status.PodIP != "" || saved.Status.HostIP != "" || saved.Spec.ServiceAccountName != "" || saved.Spec.Volumes != nil {
				t.Errorf("the saved Pod keeps more than the record reads: %+v", saved)
			}
		})
	}
}
