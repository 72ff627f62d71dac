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
	// cached holds the field paths of its first containers, built once: a
	// path built anew is three to five allocations, and the rules point at
	// these fields on every admission.
	cached []containerPaths
}

// containerField is a field of a container that findings point at.
type containerField int

const (
	fieldImage containerField = iota
	fieldReadinessProbe
	fieldPrivileged
	containerFields
)

// containerFieldPath spells each containerField below the container.
var containerFieldPath = [containerFields][]string{
	fieldImage:          {"image"},
	fieldReadinessProbe: {"readinessProbe"},
	fieldPrivileged:     {"securityContext", "privileged"},
}

// Paths are cached for this many containers per list and volume mounts per
// container; those beyond are built when a finding needs them.
const (
	cachedContainers = 8
	cachedMounts     = 8
)

// containerPaths are the cached paths of one container.
type containerPaths struct {
	container *field.Path
	fields    [containerFields]*field.Path
	// mountReadOnly[j] is volumeMounts[j].readOnly.
	mountReadOnly [cachedMounts]*field.Path
}

func newContainerList(name string, containers func(*corev1.PodSpec) []corev1.Container) containerList {
	l := containerList{name: name, containers: containers, cached: make([]containerPaths, cachedContainers)}
	for i := range l.cached {
		c := &l.cached[i]
		c.container = podSpecPath.Child(name).Index(i)
		for f := range c.fields {
			c.fields[f] = c.container.Child(containerFieldPath[f][0], containerFieldPath[f][1:]...)
		}
		for j := range c.mountReadOnly {
			c.mountReadOnly[j] = c.container.Child("volumeMounts").Index(j).Child("readOnly")
		}
	}
	return l
}

// containerLists are the lists whose containers run on the node. Ephemeral
// containers cannot appear in a template.
var containerLists = [...]containerList{
	newContainerList("initContainers", func(s *corev1.PodSpec) []corev1.Container { return s.InitContainers }),
	newContainerList("containers", func(s *corev1.PodSpec) []corev1.Container { return s.Containers }),
}

func (l containerList) path(i int) *field.Path {
	if i < len(l.cached) {
		return l.cached[i].container
	}
	return podSpecPath.Child(l.name).Index(i)
}

// fieldPath is the path of field f of container i.
func (l containerList) fieldPath(i int, f containerField) *field.Path {
	if i < len(l.cached) {
		return l.cached[i].fields[f]
	}
	return l.path(i).Child(containerFieldPath[f][0], containerFieldPath[f][1:]...)
}

// mountReadOnlyPath is the path of volumeMounts[j].readOnly of container i.
func (l containerList) mountReadOnlyPath(i, j int) *field.Path {
	if i < len(l.cached) && j < cachedMounts {
		return l.cached[i].mountReadOnly[j]
	}
	return l.path(i).Child("volumeMounts").Index(j).Child("readOnly")
}

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
