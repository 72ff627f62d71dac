package rules

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

func TestCheckSurgeHostPort(t *testing.T) {
	const surgeField = "spec.updateStrategy.rollingUpdate.maxSurge"
	hostPort := testobj.WithPorts(corev1.ContainerPort{Name: "metrics", ContainerPort: 9100, HostPort: 9100, Protocol: corev1.ProtocolTCP})
	containerPort := testobj.WithPorts(corev1.ContainerPort{Name: "metrics", ContainerPort: 9100, Protocol: corev1.ProtocolTCP})
	surge := func(v *intstr.IntOrString) func(*appsv1.DaemonSet) {
		return testobj.WithRollingUpdate(testobj.IntOrInt(0), v)
	}
	proxy := testobj.Sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2",
		Ports: []corev1.ContainerPort{{ContainerPort: 8443, HostPort: 8443}}})
	proxyContainerPort := testobj.Sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2",
		Ports: []corev1.ContainerPort{{ContainerPort: 8443}}})
	// A plain init container runs to completion before the containers start.
	setupHostPort := corev1.Container{Name: "setup", Image: "example/setup:v1",
		Ports: []corev1.ContainerPort{{ContainerPort: 9999, HostPort: 9999}}}
	setupContainerPort := corev1.Container{Name: "setup", Image: "example/setup:v1",
		Ports: []corev1.ContainerPort{{ContainerPort: 9999}}}
	setupNoPorts := corev1.Container{Name: "setup", Image: "example/setup:v1"}
	// wedged is the deny for ports the scheduler must reserve; ports are
	// the "hostPort N (noun name)" parts in the order they must appear.
	wedged := func(surge string, ports string, absent ...string) []wantFinding {
		return []wantFinding{{field: surgeField,
			prefix: "maxSurge " + surge + " with " + ports + ": ",
			msg:    []string{"the surge Pod needs a port the old Pod holds", "stays Pending"},
			absent: absent}}
	}
	hostNetworkWarn := func(surge string) []wantFinding {
		return []wantFinding{{field: surgeField, action: policy.ActionWarn,
			prefix: "maxSurge " + surge + " with hostNetwork: ",
			msg:    []string{"the new Pod cannot bind a port the old one holds"}}}
	}
	malformed := func(what ...string) []wantFinding {
		return []wantFinding{{field: surgeField, msg: what}}
	}

	tests := []struct {
		name string
		ds   *appsv1.DaemonSet
		want []wantFinding
	}{
		{name: "maxSurge unset with hostPort", ds: testobj.DS(hostPort)},
		{name: "rollingUpdate unset with hostPort", ds: testobj.DS(hostPort, testobj.WithoutRollingUpdate)},
		{name: "maxSurge 0 with hostPort", ds: testobj.DS(hostPort, testobj.WithRollingUpdate(testobj.IntOrInt(1), testobj.IntOrInt(0)))},
		{name: "maxSurge 0% with hostPort", ds: testobj.DS(hostPort, testobj.WithRollingUpdate(testobj.IntOrInt(1), testobj.IntOrString("0%")))},
		{name: "maxSurge 1 with hostPort", ds: testobj.DS(hostPort, surge(testobj.IntOrInt(1))),
			want: wedged("1", "hostPort 9100 (container \"agent\")")},
		{name: "maxSurge 10% with hostPort", ds: testobj.DS(hostPort, surge(testobj.IntOrString("10%"))),
			want: wedged(`"10%"`, "hostPort 9100 (container \"agent\")")},
		{name: "maxSurge 1% rounds up to one Pod", ds: testobj.DS(hostPort, surge(testobj.IntOrString("1%"))),
			want: wedged(`"1%"`, "hostPort 9100 (container \"agent\")")},
		{name: "leading zeros are a valid percentage (API server: ^[0-9]+%$)", ds: testobj.DS(hostPort, surge(testobj.IntOrString("05%"))),
			want: wedged(`"05%"`, "hostPort 9100 (container \"agent\")")},
		{name: "00% is zero", ds: testobj.DS(hostPort, testobj.WithRollingUpdate(testobj.IntOrInt(1), testobj.IntOrString("00%")))},
		{name: "leading zeros without host ports", ds: testobj.DS(surge(testobj.IntOrString("010%")))},
		{name: "strategy type unset defaults to RollingUpdate", ds: testobj.DS(hostPort, surge(testobj.IntOrInt(1)), testobj.WithStrategyType("")),
			want: wedged("1", "hostPort 9100 (container \"agent\")")},
		{name: "OnDelete ignores maxSurge", ds: testobj.DS(hostPort, surge(testobj.IntOrInt(1)), testobj.WithStrategyType(appsv1.OnDeleteDaemonSetStrategyType))},
		{name: "maxSurge 1 without ports or hostNetwork", ds: testobj.DS(surge(testobj.IntOrInt(1)))},
		{name: "maxSurge 1 with a containerPort but no hostNetwork", ds: testobj.DS(containerPort, surge(testobj.IntOrInt(1)))},

		// Without hostNetwork the scheduler reserves the hostPorts of
		// containers and sidecars only.
		{name: "hostPort in a sidecar", ds: testobj.DS(surge(testobj.IntOrInt(1)), testobj.WithInitContainer(proxy)),
			want: wedged("1", "hostPort 8443 (sidecar \"proxy\")")},
		{name: "containerPort in a sidecar without hostNetwork", ds: testobj.DS(surge(testobj.IntOrInt(1)), testobj.WithInitContainer(proxyContainerPort))},
		{name: "hostPort in a plain init container is not reserved", ds: testobj.DS(surge(testobj.IntOrInt(1)), testobj.WithInitContainer(setupHostPort))},
		{name: "hostPort in a plain init container is left out of the list",
			ds:   testobj.DS(hostPort, surge(testobj.IntOrInt(1)), testobj.WithInitContainer(setupHostPort)),
			want: wedged("1", "hostPort 9100 (container \"agent\")", "9999", "setup")},
		{name: "hostPorts in several containers are all named",
			ds: testobj.DS(hostPort, surge(testobj.IntOrInt(1)), testobj.WithContainer(corev1.Container{Name: "exporter", Image: "example/exporter:v1",
				Ports: []corev1.ContainerPort{{ContainerPort: 9256, HostPort: 9256}}})),
			want: wedged("1", "hostPort 9100 (container \"agent\"), hostPort 9256 (container \"exporter\")")},
		{name: "sidecar ports come before the containers'",
			ds:   testobj.DS(hostPort, surge(testobj.IntOrInt(1)), testobj.WithInitContainer(setupHostPort), testobj.WithInitContainer(proxy)),
			want: wedged("1", "hostPort 8443 (sidecar \"proxy\"), hostPort 9100 (container \"agent\")", "setup")},

		// Under hostNetwork every declared port is a port on the node.
		{name: "hostNetwork with a containerPort", ds: testobj.DS(containerPort, testobj.WithHostNetwork, surge(testobj.IntOrInt(1))),
			want: wedged("1", "port 9100 under hostNetwork (container \"agent\")")},
		{name: "hostNetwork with a hostPort", ds: testobj.DS(hostPort, testobj.WithHostNetwork, surge(testobj.IntOrString("25%"))),
			want: wedged(`"25%"`, "port 9100 under hostNetwork (container \"agent\")")},
		{name: "hostNetwork with a containerPort in a sidecar", ds: testobj.DS(testobj.WithHostNetwork, surge(testobj.IntOrInt(1)), testobj.WithInitContainer(proxyContainerPort)),
			want: wedged("1", "port 8443 under hostNetwork (sidecar \"proxy\")")},
		// A plain init container of the old Pod has exited: its ports
		// are free when the surge Pod starts.
		{name: "hostNetwork with a containerPort in a plain init container only warns",
			ds:   testobj.DS(testobj.WithHostNetwork, surge(testobj.IntOrInt(1)), testobj.WithInitContainer(setupContainerPort)),
			want: hostNetworkWarn("1")},
		{name: "hostNetwork with a hostPort in a plain init container only warns",
			ds:   testobj.DS(testobj.WithHostNetwork, surge(testobj.IntOrInt(1)), testobj.WithInitContainer(setupHostPort)),
			want: hostNetworkWarn("1")},
		{name: "hostNetwork names the ports of containers and sidecars, sidecars first",
			ds: testobj.DS(containerPort, testobj.WithHostNetwork, surge(testobj.IntOrInt(1)),
				testobj.WithInitContainer(setupContainerPort), testobj.WithInitContainer(proxyContainerPort)),
			want: wedged("1", "port 8443 under hostNetwork (sidecar \"proxy\"), port 9100 under hostNetwork (container \"agent\")")},
		{name: "hostNetwork without ports only warns", ds: testobj.DS(testobj.WithHostNetwork, surge(testobj.IntOrInt(1))),
			want: hostNetworkWarn("1")},
		{name: "hostNetwork without ports, percentage", ds: testobj.DS(testobj.WithHostNetwork, surge(testobj.IntOrString("10%"))),
			want: hostNetworkWarn(`"10%"`)},
		{name: "hostNetwork with a portless plain init container only warns",
			ds: testobj.DS(testobj.WithHostNetwork, surge(testobj.IntOrInt(1)), testobj.WithInitContainer(setupNoPorts)), want: hostNetworkWarn("1")},
		{name: "hostNetwork with maxSurge 0", ds: testobj.DS(containerPort, testobj.WithHostNetwork, testobj.WithRollingUpdate(testobj.IntOrInt(1), testobj.IntOrInt(0)))},
		{name: "hostNetwork without ports and maxSurge 0", ds: testobj.DS(testobj.WithHostNetwork, testobj.WithRollingUpdate(testobj.IntOrInt(1), testobj.IntOrInt(0)))},

		{name: "malformed maxSurge string", ds: testobj.DS(surge(testobj.IntOrString("abc"))),
			want: malformed(`maxSurge "abc"`, "neither an integer nor a percentage")},
		{name: "maxSurge above 100%", ds: testobj.DS(hostPort, surge(testobj.IntOrString("150%"))),
			want: malformed(`maxSurge "150%"`, "between 0% and 100%")},
		{name: "negative maxSurge", ds: testobj.DS(surge(testobj.IntOrInt(-1))),
			want: malformed("maxSurge -1", "must not be negative")},
		{name: "fractional percentage", ds: testobj.DS(surge(testobj.IntOrString("5.5%"))),
			want: malformed(`maxSurge "5.5%"`, "whole-number percentage")},
		{name: "signed percentage", ds: testobj.DS(surge(testobj.IntOrString("+5%"))),
			want: malformed(`maxSurge "+5%"`, "whole-number percentage")},
		{name: "string without percent sign", ds: testobj.DS(surge(testobj.IntOrString("1"))),
			want: malformed(`maxSurge "1"`, "neither an integer nor a percentage")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkSurgeHostPort(tt.ds, testEnv(), &policy.NoParams{}), tt.want)
		})
	}
}

// TestEvaluate_SurgeHostPortWarnCap checks that the warn a hostNetwork agent
// without ports carries by nature survives a deny policy, while a reserved
// port conflict is denied and a plain init container's hostPort is not
// reported at all.
func TestEvaluate_SurgeHostPortWarnCap(t *testing.T) {
	surge := testobj.WithRollingUpdate(testobj.IntOrInt(0), testobj.IntOrInt(1))
	dns := corev1.ContainerPort{ContainerPort: 53, HostPort: 53, Protocol: corev1.ProtocolUDP}
	tests := []struct {
		name string
		ds   *appsv1.DaemonSet
		want policy.Action // "" for no finding
	}{
		{"hostNetwork without ports", testobj.DS(testobj.WithHostNetwork, surge), policy.ActionWarn},
		{"hostPort", testobj.DS(surge, testobj.WithPorts(dns)), policy.ActionDeny},
		{"sidecar hostPort", testobj.DS(surge, testobj.WithInitContainer(testobj.Sidecar(corev1.Container{Name: "dns", Image: "example/dns:v1",
			Ports: []corev1.ContainerPort{dns}}))), policy.ActionDeny},
		{"plain init container hostPort", testobj.DS(surge, testobj.WithInitContainer(corev1.Container{Name: "dns", Image: "example/dns:v1",
			Ports: []corev1.ContainerPort{dns}})), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := findingsOf(policy.Evaluate(tt.ds, policy.Env{Policy: Builtin().Default(), Now: testobj.Now}), surgeHostPortID)
			if tt.want == "" {
				if len(fs) > 0 {
					t.Fatalf("want no finding, got:\n%s", describeFindings(fs))
				}
				return
			}
			if len(fs) != 1 || fs[0].Action != tt.want {
				t.Fatalf("want one %s finding, got:\n%s", tt.want, describeFindings(fs))
			}
		})
	}
}
