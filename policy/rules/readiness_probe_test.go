package rules

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

func TestCheckReadinessProbe(t *testing.T) {
	const started = `has no readinessProbe: numberReady only means "started"`
	noProbe := func(c *corev1.Container) { c.ReadinessProbe = nil }
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	exporter := corev1.Container{Name: "exporter", Image: "example/exporter:v1"}
	probed := corev1.Container{Name: "exporter", Image: "example/exporter:v1", ReadinessProbe: probe}
	initC := corev1.Container{Name: "setup", Image: "example/setup:v1"}
	proxy := testobj.Sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2"})
	probedProxy := testobj.Sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2", ReadinessProbe: probe})

	tests := []struct {
		name string
		ds   *appsv1.DaemonSet
		want []wantFinding
	}{
		{name: "probe present", ds: testobj.DS()},
		{name: "probe missing", ds: testobj.DS(testobj.WithAgent(noProbe)),
			want: []wantFinding{{field: "spec.template.spec.containers[0].readinessProbe",
				prefix: `container "agent" ` + started}}},
		{name: "liveness probe does not count", ds: testobj.DS(testobj.WithAgent(func(c *corev1.Container) {
			c.LivenessProbe, c.ReadinessProbe = c.ReadinessProbe, nil
		})), want: []wantFinding{{field: "spec.template.spec.containers[0].readinessProbe", prefix: `container "agent" ` + started}}},
		{name: "second container missing", ds: testobj.DS(testobj.WithContainer(exporter)),
			want: []wantFinding{{field: "spec.template.spec.containers[1].readinessProbe", prefix: `container "exporter" ` + started}}},
		{name: "every container missing, in order", ds: testobj.DS(testobj.WithAgent(noProbe), testobj.WithContainer(exporter)),
			want: []wantFinding{
				{field: "spec.template.spec.containers[0].readinessProbe", prefix: `container "agent" `},
				{field: "spec.template.spec.containers[1].readinessProbe", prefix: `container "exporter" `},
			}},
		{name: "every container probed", ds: testobj.DS(testobj.WithContainer(probed))},

		// Plain init containers finish before the Pod can be ready; a
		// sidecar's readiness counts toward the Pod's.
		{name: "plain init containers need none", ds: testobj.DS(testobj.WithInitContainer(initC))},
		{name: "sidecar without probe", ds: testobj.DS(testobj.WithInitContainer(proxy)),
			want: []wantFinding{{field: "spec.template.spec.initContainers[0].readinessProbe",
				prefix: `sidecar "proxy" ` + started}}},
		{name: "sidecar with probe", ds: testobj.DS(testobj.WithInitContainer(probedProxy))},
		{name: "sidecar after a plain init container keeps its index", ds: testobj.DS(testobj.WithInitContainer(initC), testobj.WithInitContainer(proxy)),
			want: []wantFinding{{field: "spec.template.spec.initContainers[1].readinessProbe",
				prefix: `sidecar "proxy" ` + started, absent: []string{"setup"}}}},
		{name: "sidecars first, then containers", ds: testobj.DS(testobj.WithAgent(noProbe), testobj.WithInitContainer(initC), testobj.WithInitContainer(proxy)),
			want: []wantFinding{
				{field: "spec.template.spec.initContainers[1].readinessProbe", prefix: `sidecar "proxy" `},
				{field: "spec.template.spec.containers[0].readinessProbe", prefix: `container "agent" `},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkReadinessProbe(tt.ds, testEnv(), &policy.NoParams{}), tt.want)
		})
	}
}

func TestCheckReadinessProbe_Remediation(t *testing.T) {
	ds := testobj.DS(testobj.WithInitContainer(testobj.Sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2"})))
	assertRemediation(t, checkReadinessProbe(ds, testEnv(), &policy.NoParams{}), `add a readinessProbe to sidecar "proxy".`)
}
