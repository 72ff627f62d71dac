package rules

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

func TestCheckHostPathReadOnly(t *testing.T) {
	mount := func(ms ...corev1.VolumeMount) func(*corev1.Container) {
		return func(c *corev1.Container) { c.VolumeMounts = ms }
	}
	rw := func(name, at string) corev1.VolumeMount { return corev1.VolumeMount{Name: name, MountPath: at} }
	ro := func(name, at string) corev1.VolumeMount {
		return corev1.VolumeMount{Name: name, MountPath: at, ReadOnly: true}
	}
	cni := HostPathReadOnlyParams{AllowWritable: []string{"/etc/cni"}}
	// writable is the finding for a writable hostPath mount; who is the
	// container's noun and quoted name, e.g. `init container "install-cni"`.
	writable := func(fieldPath, who, hostPath string) wantFinding {
		return wantFinding{field: fieldPath,
			prefix: who + " mounts hostPath " + hostPath + " writable",
			msg:    []string{"on every node it covers"}}
	}
	installCNI := corev1.Container{Name: "install-cni", Image: "example/cni:v1", VolumeMounts: []corev1.VolumeMount{rw("cni-bin", "/host/opt/cni/bin")}}

	tests := []struct {
		name   string
		ds     *appsv1.DaemonSet
		params HostPathReadOnlyParams
		want   []wantFinding
	}{
		{name: "no volumes", ds: testobj.DS()},
		{name: "writable hostPath", ds: testobj.DS(testobj.WithVolume(testobj.HostPathVolume("varlog", "/var/log")), testobj.WithAgent(mount(rw("varlog", "/host/var/log")))),
			want: []wantFinding{writable("spec.template.spec.containers[0].volumeMounts[0].readOnly", `container "agent"`, "/var/log")}},
		{name: "read-only hostPath", ds: testobj.DS(testobj.WithVolume(testobj.HostPathVolume("varlog", "/var/log")), testobj.WithAgent(mount(ro("varlog", "/host/var/log"))))},
		{name: "hostPath volume never mounted", ds: testobj.DS(testobj.WithVolume(testobj.HostPathVolume("varlog", "/var/log")))},
		{name: "writable emptyDir", ds: testobj.DS(
			testobj.WithVolume(corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}),
			testobj.WithAgent(mount(rw("tmp", "/tmp"))))},
		{name: "second mount is the writable hostPath", ds: testobj.DS(
			testobj.WithVolume(corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "agent-config"}}}}),
			testobj.WithVolume(testobj.HostPathVolume("proc", "/proc")),
			testobj.WithAgent(mount(rw("config", "/etc/agent"), rw("proc", "/host/proc")))),
			want: []wantFinding{writable("spec.template.spec.containers[0].volumeMounts[1].readOnly", `container "agent"`, "/proc")}},
		{name: "init container", ds: testobj.DS(testobj.WithVolume(testobj.HostPathVolume("cni-bin", "/opt/cni/bin")), testobj.WithInitContainer(installCNI)),
			want: []wantFinding{writable("spec.template.spec.initContainers[0].volumeMounts[0].readOnly", `init container "install-cni"`, "/opt/cni/bin")}},
		{name: "same volume in two containers", ds: testobj.DS(testobj.WithVolume(testobj.HostPathVolume("cni-bin", "/opt/cni/bin")), testobj.WithInitContainer(installCNI),
			testobj.WithAgent(mount(ro("cni-bin", "/host/opt/cni/bin"))),
			testobj.WithContainer(corev1.Container{Name: "watcher", Image: "example/watcher:v1", VolumeMounts: []corev1.VolumeMount{rw("cni-bin", "/bin-dir")}})),
			want: []wantFinding{
				writable("spec.template.spec.initContainers[0].volumeMounts[0].readOnly", `init container "install-cni"`, "/opt/cni/bin"),
				writable("spec.template.spec.containers[1].volumeMounts[0].readOnly", `container "watcher"`, "/opt/cni/bin"),
			}},
		{name: "sidecar", ds: testobj.DS(testobj.WithVolume(testobj.HostPathVolume("run", "/run/agent")),
			testobj.WithInitContainer(testobj.Sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:v2", VolumeMounts: []corev1.VolumeMount{rw("run", "/run/agent")}}))),
			want: []wantFinding{writable("spec.template.spec.initContainers[0].volumeMounts[0].readOnly", `sidecar "proxy"`, "/run/agent")}},
		{name: "allowWritable covers a subdirectory", params: cni,
			ds: testobj.DS(testobj.WithVolume(testobj.HostPathVolume("cni-conf", "/etc/cni/net.d")), testobj.WithAgent(mount(rw("cni-conf", "/host/etc/cni/net.d"))))},
		{name: "allowWritable covers the directory itself", params: cni,
			ds: testobj.DS(testobj.WithVolume(testobj.HostPathVolume("cni", "/etc/cni/")), testobj.WithAgent(mount(rw("cni", "/host/etc/cni"))))},
		{name: "allowWritable is not a string prefix", params: cni,
			ds:   testobj.DS(testobj.WithVolume(testobj.HostPathVolume("cnix", "/etc/cnix")), testobj.WithAgent(mount(rw("cnix", "/host/etc/cnix")))),
			want: []wantFinding{writable("spec.template.spec.containers[0].volumeMounts[0].readOnly", `container "agent"`, "/etc/cnix")}},
		{name: "allowWritable does not cover the parent", params: cni,
			ds:   testobj.DS(testobj.WithVolume(testobj.HostPathVolume("etc", "/etc")), testobj.WithAgent(mount(rw("etc", "/host/etc")))),
			want: []wantFinding{writable("spec.template.spec.containers[0].volumeMounts[0].readOnly", `container "agent"`, "/etc")}},
		{name: "dot-dot does not escape allowWritable", params: cni,
			ds:   testobj.DS(testobj.WithVolume(testobj.HostPathVolume("shadow", "/etc/cni/../shadow")), testobj.WithAgent(mount(rw("shadow", "/host/shadow")))),
			want: []wantFinding{writable("spec.template.spec.containers[0].volumeMounts[0].readOnly", `container "agent"`, "/etc/cni/../shadow")}},
		{name: "allowWritable with a trailing slash", params: HostPathReadOnlyParams{AllowWritable: []string{"/etc/cni/"}},
			ds: testobj.DS(testobj.WithVolume(testobj.HostPathVolume("cni-conf", "/etc/cni/net.d")), testobj.WithAgent(mount(rw("cni-conf", "/host/etc/cni/net.d"))))},
		{name: "allowWritable root allows everything", params: HostPathReadOnlyParams{AllowWritable: []string{"/"}},
			ds: testobj.DS(testobj.WithVolume(testobj.HostPathVolume("root", "/")), testobj.WithAgent(mount(rw("root", "/host"))))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkHostPathReadOnly(tt.ds, testEnv(), &tt.params), tt.want)
		})
	}
}

func TestCheckHostPathReadOnly_Remediation(t *testing.T) {
	ds := testobj.DS(testobj.WithVolume(testobj.HostPathVolume("varlog", "/var/log")), testobj.WithAgent(func(c *corev1.Container) {
		c.VolumeMounts = []corev1.VolumeMount{{Name: "varlog", MountPath: "/var/log"}}
	}))
	assertRemediation(t, checkHostPathReadOnly(ds, testEnv(), &HostPathReadOnlyParams{}),
		`set readOnly: true on the "varlog" mount of container "agent".`)
}

func TestHostPathReadOnlyParams_Validate(t *testing.T) {
	fp := field.NewPath("rules", hostPathReadOnlyID, "parameters")
	tests := []struct {
		name  string
		paths []string
		want  []fieldErr
	}{
		{name: "none"},
		{name: "absolute", paths: []string{"/etc/cni", "/var/lib/calico/"}},
		{name: "relative", paths: []string{"/etc/cni", "var/log"},
			want: []fieldErr{{field: fp.String() + ".allowWritable[1]", typ: field.ErrorTypeInvalid, detail: "absolute path"}}},
		{name: "empty", paths: []string{""},
			want: []fieldErr{{field: fp.String() + ".allowWritable[0]", typ: field.ErrorTypeInvalid}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := HostPathReadOnlyParams{AllowWritable: tt.paths}
			assertFieldErrors(t, p.Validate(fp), tt.want)
		})
	}

	t.Run("Compile reports it", func(t *testing.T) {
		cfg := Builtin().DefaultConfig()
		policy.RuleConfigOf[HostPathReadOnlyParams](cfg, hostPathReadOnlyID).Parameters.AllowWritable = []string{"etc/cni"}
		compileErr(t, cfg, "rules.host-path-read-only.parameters.allowWritable[0]")
	})
}
