// Package vaptest generates DaemonSets for the tests that compare the
// generated ValidatingAdmissionPolicies with the webhook.
package vaptest

import (
	"fmt"
	"math/rand/v2"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The generator draws DaemonSets over every field the static rules read:
// images, probes, privilege, ports under hostNetwork, hostPath mounts,
// update strategies, tolerations, node selection, and dsguard's own
// annotations, valid and broken. Every object is one the API server accepts.

const controlPlaneKey = "node-role.kubernetes.io/control-plane"

// modelNodeName is coverage.ModelNodeName, the name and hostname of the
// model tainted nodes (this package imports nothing of dsguard; the vap
// tests check that the two agree).
const modelNodeName = "model-control-plane"

var images = []string{
	"nginx", "nginx:latest", "nginx:1.27.3", "registry.local:5000/agent", "registry.local:5000/agent:v2",
	"registry.local:5000/agent:latest", "ghcr.io/org/team/agent:", "ghcr.io/org/agent@sha256:" + sha,
	"quay.io/prometheus/node-exporter:v1.9.1",
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

var tolerations = [][]corev1.Toleration{
	nil,
	{{Key: controlPlaneKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	{{Key: controlPlaneKey, Effect: corev1.TaintEffectNoSchedule}},                // Equal, empty value
	{{Key: controlPlaneKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}}, // wrong value
	{{Key: controlPlaneKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
	{{Key: controlPlaneKey, Operator: corev1.TolerationOpExists}}, // every effect
	{{Operator: corev1.TolerationOpExists}},                       // everything
	{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
	{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
}

var nodeSelectors = []map[string]string{
	nil,
	{corev1.LabelOSStable: "linux"},
	{"beta.kubernetes.io/arch": "arm64"},
	{controlPlaneKey: ""},
	{"dsguard.io/pool": "gpu"},
	{corev1.LabelOSStable: "linux", "dsguard.io/pool": "infra"},
	{corev1.LabelOSStable: "windows"},
	{corev1.LabelHostname: modelNodeName},
}

func requirement(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

var affinityTerms = [][]corev1.NodeSelectorTerm{
	nil,
	{{MatchExpressions: []corev1.NodeSelectorRequirement{requirement(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux")}}},
	{{MatchExpressions: []corev1.NodeSelectorRequirement{requirement("dsguard.io/pool", corev1.NodeSelectorOpNotIn, "fargate")}}},
	{{MatchExpressions: []corev1.NodeSelectorRequirement{requirement(controlPlaneKey, corev1.NodeSelectorOpExists)}}},
	{{MatchExpressions: []corev1.NodeSelectorRequirement{requirement(controlPlaneKey, corev1.NodeSelectorOpDoesNotExist)}}},
	{{MatchFields: []corev1.NodeSelectorRequirement{requirement("metadata.name", corev1.NodeSelectorOpIn, "worker-1")}}},
	{
		{MatchExpressions: []corev1.NodeSelectorRequirement{requirement("dsguard.io/pool", corev1.NodeSelectorOpIn, "gpu")}},
		{MatchExpressions: []corev1.NodeSelectorRequirement{requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")}},
	},
	{
		{MatchExpressions: []corev1.NodeSelectorRequirement{requirement("dsguard.io/pool", corev1.NodeSelectorOpIn, "gpu")}},
		{MatchExpressions: []corev1.NodeSelectorRequirement{requirement("dsguard.io/pool", corev1.NodeSelectorOpIn, "infra")}},
	},
	{{MatchExpressions: []corev1.NodeSelectorRequirement{requirement(corev1.LabelHostname, corev1.NodeSelectorOpExists)}}},
	{{MatchExpressions: []corev1.NodeSelectorRequirement{requirement("dsguard.io/pool", corev1.NodeSelectorOpDoesNotExist)}}},
	{{MatchExpressions: []corev1.NodeSelectorRequirement{requirement(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "windows")}}},
	{{MatchExpressions: []corev1.NodeSelectorRequirement{requirement(corev1.LabelArchStable, corev1.NodeSelectorOpNotIn, "amd64")}}},
	{{MatchExpressions: []corev1.NodeSelectorRequirement{requirement("dsguard.io/rack", corev1.NodeSelectorOpGt, "3")}}},
	{{MatchExpressions: []corev1.NodeSelectorRequirement{requirement("dsguard.io/rack", corev1.NodeSelectorOpLt, "not-a-number")}}},
	{{MatchFields: []corev1.NodeSelectorRequirement{requirement("metadata.name", corev1.NodeSelectorOpNotIn, "worker-1")}}},
	{{MatchFields: []corev1.NodeSelectorRequirement{requirement("metadata.name", corev1.NodeSelectorOpIn, modelNodeName)}}},
	{
		{MatchExpressions: []corev1.NodeSelectorRequirement{
			requirement(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
			requirement(controlPlaneKey, corev1.NodeSelectorOpDoesNotExist),
		}},
		{MatchFields: []corev1.NodeSelectorRequirement{requirement("metadata.name", corev1.NodeSelectorOpIn, "worker-2")}},
	},
}

var hostPaths = []string{"/var/log", "/var/log/", "/etc/cni/net.d", "/", "/var/lib/agent", "/var/lib/agent/data", "/var/lib/agentx"}

var annotationSets = []map[string]string{
	nil,
	{"coverage.dsguard.io/intended": "GPU nodes only"},
	{"coverage.dsguard.io/intended": "  "},
	{"exempt.dsguard.io/control-plane-toleration": "runs on workers only; expires=2099-12-31"},
	{"exempt.dsguard.io/control-plane-toleration": "legacy agent; expires=2020-01-01"},
	{"exempt.dsguard.io/control-plane-toleration": "; expires=2099-12-31"},
	{"exempt.dsguard.io/control-plane-toleration": "no expiry given"},
	{"exempt.dsguard.io/privileged": "needs the host; Expires : 2099-01-31"},
	{"exempt.dsguard.io/privileged": "bad date; expires=2099-02-30"},
	{"exempt.dsguard.io/privileged": "leap day; expires=2096-02-29"},
	{"exempt.dsguard.io/image-pinned": "pinned by the build; a;b; expires=2099-06-01"},
	{"exempt.dsguard.io/surge-host-port": "expires=2099-06-01"},
	{"exempt.dsguard.io/no-such-rule": "typo"},
	{"exempt.dsguard.io/invalid-annotation": "cannot be exempted"},
	{"exempt.dsguard.io/max-unavailable": "big fleet; expires=2099-01-01", "exempt.dsguard.io/readiness-probe": "startup only"},
}

type gen struct{ r *rand.Rand }

func pick[T any](g *gen, xs []T) T { return xs[g.r.IntN(len(xs))] }

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

// container draws a container; hostPorts are the host ports the Pod's
// containers hold so far: the API server refuses a Pod whose containers
// share one, so a port drawn again is left out.
func (g *gen) container(name string, hostNetwork bool, mounts []string, hostPorts map[int32]bool) corev1.Container {
	c := corev1.Container{Name: name, Image: pick(g, images)}
	if g.chance(0.6) {
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9100)}}}
	}
	switch g.r.IntN(4) {
	case 0:
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	case 1:
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(false)}
	}
	if g.chance(0.5) {
		port := corev1.ContainerPort{ContainerPort: int32(9000 + g.r.IntN(50))}
		if g.chance(0.5) {
			// Under hostNetwork the API server requires hostPort == containerPort.
			port.HostPort = port.ContainerPort
			if !hostNetwork && g.chance(0.5) {
				port.HostPort = int32(19000 + g.r.IntN(50))
			}
		}
		// Under hostNetwork the API server makes the container port a host
		// port when none is given.
		held := port.HostPort
		if held == 0 && hostNetwork {
			held = port.ContainerPort
		}
		if held == 0 || !hostPorts[held] {
			if held != 0 {
				hostPorts[held] = true
			}
			c.Ports = []corev1.ContainerPort{port}
		}
	}
	for i, m := range mounts {
		if g.chance(0.6) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: m, MountPath: fmt.Sprintf("/mnt/%d", i), ReadOnly: g.chance(0.5)})
		}
	}
	return c
}

func (g *gen) daemonSet(i int) *appsv1.DaemonSet {
	name := fmt.Sprintf("gen-%03d", i)
	labels := map[string]string{"app": name}
	if g.chance(0.5) {
		labels["tier"] = "node-agent"
	}
	if g.chance(0.2) {
		labels["dsguard.io/skip"] = "yes"
	}
	spec := corev1.PodSpec{HostNetwork: g.chance(0.4), Tolerations: pick(g, tolerations), NodeSelector: pick(g, nodeSelectors)}
	if terms := pick(g, affinityTerms); terms != nil {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	switch g.r.IntN(20) {
	case 0:
		spec.NodeName = "worker-1"
	case 1:
		spec.NodeName = modelNodeName
	}
	var mounts []string
	for j := range g.r.IntN(3) {
		v := corev1.Volume{Name: fmt.Sprintf("vol-%d", j)}
		if g.chance(0.8) {
			v.HostPath = &corev1.HostPathVolumeSource{Path: pick(g, hostPaths)}
		} else {
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		}
		spec.Volumes = append(spec.Volumes, v)
		mounts = append(mounts, v.Name)
	}
	hostPorts := map[int32]bool{}
	for j := range 1 + g.r.IntN(2) {
		spec.Containers = append(spec.Containers, g.container(fmt.Sprintf("main-%d", j), spec.HostNetwork, mounts, hostPorts))
	}
	for j := range g.r.IntN(3) {
		c := g.container(fmt.Sprintf("init-%d", j), spec.HostNetwork, mounts, hostPorts)
		if g.chance(0.5) {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		} else {
			c.ReadinessProbe = nil // only sidecars may have one
		}
		spec.InitContainers = append(spec.InitContainers, c)
	}
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: pick(g, annotationSets)},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: spec},
		},
	}
	switch g.r.IntN(6) {
	case 0:
		ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
	case 1:
		// Left to the API server's defaults.
	default:
		ru := &appsv1.RollingUpdateDaemonSet{}
		values := []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(3), intstr.FromString("10%"), intstr.FromString("25%"),
			intstr.FromString("26%"), intstr.FromString("050%"), intstr.FromString("100%")}
		if g.chance(0.4) {
			// The API server wants exactly one of the two above zero.
			ru.MaxSurge = ptr.To(pick(g, values))
			ru.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		} else {
			ru.MaxUnavailable = ptr.To(pick(g, values))
		}
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: ru}
	}
	return ds
}

// Generate returns n DaemonSets drawn from seed; the same seed gives the
// same DaemonSets.
func Generate(seed uint64, n int) []*appsv1.DaemonSet {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	out := make([]*appsv1.DaemonSet, n)
	for i := range out {
		out[i] = g.daemonSet(i)
	}
	return out
}
