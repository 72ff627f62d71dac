package policy

import (
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
)

// Field paths are immutable linked lists, so shared parents are safe.
var (
	specPath           = field.NewPath("spec")
	updateStrategyPath = specPath.Child("updateStrategy")
	rollingUpdatePath  = updateStrategyPath.Child("rollingUpdate")
	podSpecPath        = specPath.Child("template", "spec")
	tolerationsPath    = podSpecPath.Child("tolerations")
)

// containerList names one of the pod spec's container lists.
type containerList struct {
	name       string
	containers func(*corev1.PodSpec) []corev1.Container
}

// containerLists are the lists whose containers run on the node. Ephemeral
// containers cannot appear in a template.
var containerLists = [...]containerList{
	{"initContainers", func(s *corev1.PodSpec) []corev1.Container { return s.InitContainers }},
	{"containers", func(s *corev1.PodSpec) []corev1.Container { return s.Containers }},
}

func (l containerList) path(i int) *field.Path { return podSpecPath.Child(l.name).Index(i) }

// isSidecar reports whether an init container is a native sidecar
// (restartPolicy Always): it keeps running beside the main containers, so
// its ports are reserved and its readiness counts toward the Pod's.
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// runsAlongside reports whether a container of list l runs for the Pod's
// whole life: every regular container and every sidecar.
func (l containerList) runsAlongside(c *corev1.Container) bool {
	return l.name == "containers" || isSidecar(c)
}

// noun names a container for a message: "container", "sidecar" or "init container".
func (l containerList) noun(c *corev1.Container) string {
	switch {
	case l.name == "containers":
		return "container"
	case isSidecar(c):
		return "sidecar"
	}
	return "init container"
}

// Toleration operators Gt and Lt sit behind an alpha gate that is off by
// default in Kubernetes 1.37; model the default.
const comparisonOperatorsEnabled = false

// daemonPodTolerations are the tolerations the DaemonSet controller adds to
// every daemon Pod (AddOrUpdateDaemonPodTolerations in
// pkg/controller/daemon/util), so a node with these taints still counts.
var daemonPodTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// hostNetworkToleration is added on top for hostNetwork Pods, which do not
// need the node's Pod network.
var hostNetworkToleration = corev1.Toleration{
	Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
}

// toleratedByDaemonPod reports whether a daemon Pod made from spec tolerates
// taint, counting the tolerations the controller adds. It does not allocate.
func toleratedByDaemonPod(spec *corev1.PodSpec, taint *corev1.Taint) bool {
	log := logr.Discard()
	if schedulingcorev1.TolerationsTolerateTaint(log, spec.Tolerations, taint, comparisonOperatorsEnabled) ||
		schedulingcorev1.TolerationsTolerateTaint(log, daemonPodTolerations, taint, comparisonOperatorsEnabled) {
		return true
	}
	return spec.HostNetwork && hostNetworkToleration.ToleratesTaint(log, taint, comparisonOperatorsEnabled)
}

// isRollingUpdate treats an unset strategy type as RollingUpdate, the apps/v1
// default, so that manifests checked offline (not yet defaulted by the API
// server) are judged like the object the server will store.
func isRollingUpdate(ds *appsv1.DaemonSet) bool {
	t := ds.Spec.UpdateStrategy.Type
	return t == "" || t == appsv1.RollingUpdateDaemonSetStrategyType
}
