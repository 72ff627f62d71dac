package rules

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// isRollingUpdate treats an unset strategy type as RollingUpdate, the apps/v1
// default, so that manifests checked offline (not yet defaulted by the API
// server) are judged like the object the server will store.
func isRollingUpdate(ds *appsv1.DaemonSet) bool {
	t := ds.Spec.UpdateStrategy.Type
	return t == "" || t == appsv1.RollingUpdateDaemonSetStrategyType
}
