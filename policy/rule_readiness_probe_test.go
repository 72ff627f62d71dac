package policy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestCheckReadinessProbe(t *testing.T) {
	const started = `has no readinessProbe: numberReady only means "started"`
	noProbe := func(c *corev1.Container) { c.ReadinessProbe = nil }
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	exporter := corev1.Container{Name: "exporter", Image: "example/exporter:v1"}
	probed := corev1.Container{Name: "exporter", Image: "example/exporter:v1", ReadinessProbe: probe}
	initC := corev1.Container{Name: "setup", Image: "example/setup:v1"}
	proxy := sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2"})
	probedProxy := sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2", ReadinessProbe: probe})

	tests := []struct {
		name string
		ds   *appsv1.DaemonSet
		want []wantFinding
	}{
		{name: "probe present", ds: newDS()},
		{name: "probe missing", ds: newDS(withAgent(noProbe)),
			want: []wantFinding{{field: "spec.template.spec.containers[0].readinessProbe",
				prefix: `container "agent" ` + started}}},
		{name: "liveness probe does not count", ds: newDS(withAgent(func(c *corev1.Container) {
			c.LivenessProbe, c.ReadinessProbe = c.ReadinessProbe, nil
		})), want: []wantFinding{{field: "spec.template.spec.containers[0].readinessProbe", prefix: `container "agent" ` + started}}},
		{name: "second container missing", ds: newDS(withContainer(exporter)),
			want: []wantFinding{{field: "spec.template.spec.containers[1].readinessProbe", prefix: `container "exporter" ` + started}}},
		{name: "every container missing, in order", ds: newDS(withAgent(noProbe), withContainer(exporter)),
			want: []wantFinding{
				{field: "spec.template.spec.containers[0].readinessProbe", prefix: `container "agent" `},
				{field: "spec.template.spec.containers[1].readinessProbe", prefix: `container "exporter" `},
			}},
		{name: "every container probed", ds: newDS(withContainer(probed))},

		// Plain init containers finish before the Pod can be ready; a
		// sidecar's readiness counts toward the Pod's.
		{name: "plain init containers need none", ds: newDS(withInitContainer(initC))},
		{name: "sidecar without probe", ds: newDS(withInitContainer(proxy)),
			want: []wantFinding{{field: "spec.template.spec.initContainers[0].readinessProbe",
				prefix: `sidecar "proxy" ` + started}}},
		{name: "sidecar with probe", ds: newDS(withInitContainer(probedProxy))},
		{name: "sidecar after a plain init container keeps its index", ds: newDS(withInitContainer(initC), withInitContainer(proxy)),
			want: []wantFinding{{field: "spec.template.spec.initContainers[1].readinessProbe",
				prefix: `sidecar "proxy" ` + started, absent: []string{"setup"}}}},
		{name: "sidecars first, then containers", ds: newDS(withAgent(noProbe), withInitContainer(initC), withInitContainer(proxy)),
			want: []wantFinding{
				{field: "spec.template.spec.initContainers[1].readinessProbe", prefix: `sidecar "proxy" `},
				{field: "spec.template.spec.containers[0].readinessProbe", prefix: `container "agent" `},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkReadinessProbe(tt.ds, testEnv(), &NoParams{}), tt.want)
		})
	}
}

func TestCheckReadinessProbe_Remediation(t *testing.T) {
	ds := newDS(withInitContainer(sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2"})))
	fs := checkReadinessProbe(ds, testEnv(), &NoParams{})
	if len(fs) != 1 {
		t.Fatalf("got %d findings, want 1:\n%s", len(fs), describeFindings(fs))
	}
	if want := `add a readinessProbe to sidecar "proxy".`; fs[0].Remediation != want {
		t.Errorf("remediation %q, want %q", fs[0].Remediation, want)
	}
}
