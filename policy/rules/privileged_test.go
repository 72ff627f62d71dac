package rules

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
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
		{name: "no securityContext", ds: testobj.DS()},
		{name: "privileged unset", ds: testobj.DS(testobj.WithAgent(privileged(nil)))},
		{name: "privileged false", ds: testobj.DS(testobj.WithAgent(privileged(new(false))))},
		{name: "capabilities only", ds: testobj.DS(testobj.WithAgent(capsOnly))},
		{name: "privileged true", ds: testobj.DS(testobj.WithAgent(privileged(new(true)))),
			want: []wantFinding{{field: "spec.template.spec.containers[0].securityContext.privileged",
				prefix: `container "agent" runs privileged`, msg: []string{"on every node it covers"}}}},
		{name: "privileged init container", ds: testobj.DS(testobj.WithInitContainer(initC)),
			want: []wantFinding{{field: "spec.template.spec.initContainers[0].securityContext.privileged",
				prefix: `init container "install-cni" runs privileged`}}},
		{name: "privileged sidecar", ds: testobj.DS(testobj.WithInitContainer(testobj.Sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2",
			SecurityContext: &corev1.SecurityContext{Privileged: new(true)}}))),
			want: []wantFinding{{field: "spec.template.spec.initContainers[0].securityContext.privileged",
				prefix: `sidecar "proxy" runs privileged`}}},
		{name: "init containers first", ds: testobj.DS(testobj.WithAgent(privileged(new(true))), testobj.WithInitContainer(initC)),
			want: []wantFinding{
				{field: "spec.template.spec.initContainers[0].securityContext.privileged", prefix: `init container "install-cni"`},
				{field: "spec.template.spec.containers[0].securityContext.privileged", prefix: `container "agent"`},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkPrivileged(tt.ds, testEnv(), &policy.NoParams{}), tt.want)
		})
	}
}
