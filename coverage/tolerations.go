package coverage

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
)

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

// ToleratedByDaemonPod reports whether a daemon Pod made from spec tolerates
// taint, counting the tolerations the controller adds. It does not allocate.
func ToleratedByDaemonPod(spec *corev1.PodSpec, taint *corev1.Taint) bool {
	log := logr.Discard()
	if schedulingcorev1.TolerationsTolerateTaint(log, spec.Tolerations, taint, comparisonOperatorsEnabled) ||
		schedulingcorev1.TolerationsTolerateTaint(log, daemonPodTolerations, taint, comparisonOperatorsEnabled) {
		return true
	}
	return spec.HostNetwork && hostNetworkToleration.ToleratesTaint(log, taint, comparisonOperatorsEnabled)
}
