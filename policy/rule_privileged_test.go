package policy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestCheckPrivileged(t *testing.T) {
	privileged := func(v *bool) func(*corev1.Container) {
		return func(c *corev1.Container) { c.SecurityContext = &corev1.SecurityContext{Privileged: v} }
	}
	capsOnly := func(c *corev1.Container) {
		c.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
	}
	initC := corev1.Container{Name: "install-cni", Image: "example/cni:v1",
		SecurityContext: &corev1.SecurityContext{Privileged: new(true)}}

	tests := []struct {
		name string
		ds   *appsv1.DaemonSet
		want []wantFinding
	}{
		{name: "no securityContext", ds: newDS()},
		{name: "privileged unset", ds: newDS(withAgent(privileged(nil)))},
		{name: "privileged false", ds: newDS(withAgent(privileged(new(false))))},
		{name: "capabilities only", ds: newDS(withAgent(capsOnly))},
		{name: "privileged true", ds: newDS(withAgent(privileged(new(true)))),
			want: []wantFinding{{field: "spec.template.spec.containers[0].securityContext.privileged",
				prefix: `container "agent" runs privileged`, msg: []string{"on every node it covers"}}}},
		{name: "privileged init container", ds: newDS(withInitContainer(initC)),
			want: []wantFinding{{field: "spec.template.spec.initContainers[0].securityContext.privileged",
				prefix: `init container "install-cni" runs privileged`}}},
		{name: "privileged sidecar", ds: newDS(withInitContainer(sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2",
			SecurityContext: &corev1.SecurityContext{Privileged: new(true)}}))),
			want: []wantFinding{{field: "spec.template.spec.initContainers[0].securityContext.privileged",
				prefix: `sidecar "proxy" runs privileged`}}},
		{name: "init containers first", ds: newDS(withAgent(privileged(new(true))), withInitContainer(initC)),
			want: []wantFinding{
				{field: "spec.template.spec.initContainers[0].securityContext.privileged", prefix: `init container "install-cni"`},
				{field: "spec.template.spec.containers[0].securityContext.privileged", prefix: `container "agent"`},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkPrivileged(tt.ds, testEnv(), &NoParams{}), tt.want)
		})
	}
}
