// Package testobj builds the Kubernetes objects that dsguard's unit tests
// judge: a DaemonSet every built-in rule accepts, changed by options, and
// nodes with labels and taints. Only tests import it.
package testobj

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Now is the fixed "now" of every test that judges exemption expiry.
var Now = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

// ControlPlaneKey is the key of the control-plane node label and taint.
const ControlPlaneKey = "node-role.kubernetes.io/control-plane"

// DS returns a DaemonSet that every built-in rule accepts under the
// default policy, changed by the mutators in order: namespace monitoring, one
// container "agent" (image example/agent:v1.2.3) with a readinessProbe,
// RollingUpdate with maxUnavailable 1, and a toleration {operator: Exists}.
func DS(mutators ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	labels := map[string]string{"app.kubernetes.io/name": "agent"}
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "monitoring", Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{
					MaxUnavailable: new(intstr.FromInt32(1)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "agent",
						Image: "example/agent:v1.2.3",
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)},
						}},
					}},
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				},
			},
		},
	}
	for _, m := range mutators {
		m(ds)
	}
	return ds
}

// WithTolerations replaces the template's tolerations (none: no tolerations at all).
func WithTolerations(ts ...corev1.Toleration) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = ts }
}

// WithAnnotation sets an annotation on the DaemonSet.
func WithAnnotation(key, value string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		ds.Annotations[key] = value
	}
}

// WithStrategyType sets spec.updateStrategy.type.
func WithStrategyType(t appsv1.DaemonSetUpdateStrategyType) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = t }
}

// WithRollingUpdate replaces spec.updateStrategy.rollingUpdate; nil values
// stay unset.
func WithRollingUpdate(maxUnavailable, maxSurge *intstr.IntOrString) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{
			MaxUnavailable: maxUnavailable, MaxSurge: maxSurge,
		}
	}
}

// WithoutRollingUpdate removes spec.updateStrategy.rollingUpdate.
func WithoutRollingUpdate(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate = nil }

// WithHostNetwork puts the Pods on the node's network.
func WithHostNetwork(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true }

// WithPorts replaces the first container's ports.
func WithPorts(ports ...corev1.ContainerPort) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Ports = ports }
}

// WithContainer adds a container.
func WithContainer(c corev1.Container) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, c)
	}
}

// WithInitContainer adds an init container (see Sidecar).
func WithInitContainer(c corev1.Container) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.InitContainers = append(ds.Spec.Template.Spec.InitContainers, c)
	}
}

// WithAgent changes the first container.
func WithAgent(change func(*corev1.Container)) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { change(&ds.Spec.Template.Spec.Containers[0]) }
}

// Sidecar makes c a native Sidecar: an init container with restartPolicy Always.
func Sidecar(c corev1.Container) corev1.Container {
	c.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	return c
}

// WithNodeSelector replaces the template's nodeSelector.
func WithNodeSelector(sel map[string]string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = sel }
}

// WithRequiredNodeAffinity sets required node affinity with the given terms,
// which the scheduler ORs.
func WithRequiredNodeAffinity(terms ...corev1.NodeSelectorTerm) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

// NodeTerm is a node selector term whose expressions are ANDed.
func NodeTerm(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

// NodeReq is one node selector requirement.
func NodeReq(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// WithVolume adds a volume to the template.
func WithVolume(v corev1.Volume) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes, v) }
}

// HostPathVolume is a hostPath volume.
func HostPathVolume(name, path string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
}

// IntOrInt is an int-or-string holding a number.
func IntOrInt(i int32) *intstr.IntOrString { return new(intstr.FromInt32(i)) }

// IntOrString is an int-or-string holding a string, such as "25%".
func IntOrString(s string) *intstr.IntOrString { return new(intstr.FromString(s)) }

// Node returns a Linux amd64 node whose hostname label is its name,
// changed by the options in order.
func Node(name string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// NodeLabels sets labels from key, value pairs; an empty value sets the label
// to "".
func NodeLabels(kv ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

// WithoutNodeLabel removes a label (also the default hostname, OS or arch).
func WithoutNodeLabel(key string) func(*corev1.Node) {
	return func(n *corev1.Node) { delete(n.Labels, key) }
}

// NodeTaints adds taints to a node.
func NodeTaints(ts ...corev1.Taint) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, ts...) }
}

// Cordoned marks a node unschedulable.
func Cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

// TaintOf is a taint with key, value and effect.
func TaintOf(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

// NoSchedule is a NoSchedule taint without a value.
func NoSchedule(key string) corev1.Taint { return TaintOf(key, "", corev1.TaintEffectNoSchedule) }

// NoExecute is a NoExecute taint without a value.
func NoExecute(key string) corev1.Taint { return TaintOf(key, "", corev1.TaintEffectNoExecute) }

// ControlPlaneNode is a control-plane node with the kubeadm label and taint.
func ControlPlaneNode(name string, opts ...func(*corev1.Node)) *corev1.Node {
	return Node(name, append([]func(*corev1.Node){
		NodeLabels(ControlPlaneKey, ""), NodeTaints(NoSchedule(ControlPlaneKey)),
	}, opts...)...)
}

// PoolNodes returns count nodes named prefix-1 … prefix-count, each built
// with opts.
func PoolNodes(prefix string, count int, opts ...func(*corev1.Node)) []*corev1.Node {
	out := make([]*corev1.Node, count)
	for i := range out {
		out[i] = Node(fmt.Sprintf("%s-%d", prefix, i+1), opts...)
	}
	return out
}

// Nodes flattens nodes given as *corev1.Node, []*corev1.Node or []any of
// those into one list.
func Nodes(nodes ...any) []*corev1.Node { return flattenNodes(nodes) }

func flattenNodes(nodes []any) []*corev1.Node {
	var all []*corev1.Node
	for _, n := range nodes {
		switch n := n.(type) {
		case *corev1.Node:
			all = append(all, n)
		case []*corev1.Node:
			all = append(all, n...)
		case []any:
			all = append(all, flattenNodes(n)...)
		default:
			panic(fmt.Sprintf("testobj.Nodes: %T", n))
		}
	}
	return all
}

// WithNodeName pins the template to one node by name.
func WithNodeName(name string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = name }
}

// WithNamespace sets the DaemonSet's namespace.
func WithNamespace(ns string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Namespace = ns }
}
