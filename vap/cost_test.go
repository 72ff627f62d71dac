package vap

import (
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/utils/ptr"

	"github.com/dsguard/dsguard/policy/rules"
)

// costTest runs the cost measurement on the largest DaemonSets.
var costTest = flag.Bool("vap.cost", false, "measure the generated expressions' cost on the largest DaemonSets (minutes)")

// maxObjectBytes is the largest DaemonSet the API accepts: etcd refuses a
// write above 1.5 MiB (its default --max-request-bytes). Admission may see a
// request up to 3 MiB (the API server's body limit) before etcd refuses it;
// there the host-path-read-only policies run out of budget on a DaemonSet of
// about 50,000 hostPath volumes and the request fails by failurePolicy
// (docs/modes.md).
const maxObjectBytes = 1536 * 1024

// filled returns the DaemonSet build(n) for the largest n whose JSON still
// fits in the API server's request limit.
func filled(t testing.TB, build func(n int) *appsv1.DaemonSet) *appsv1.DaemonSet {
	t.Helper()
	size := func(n int) int {
		data, err := json.Marshal(build(n))
		if err != nil {
			t.Fatal(err)
		}
		return len(data)
	}
	lo, hi := 1, 2
	for size(hi) <= maxObjectBytes {
		lo, hi = hi, hi*2
	}
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if size(mid) <= maxObjectBytes {
			lo = mid
		} else {
			hi = mid
		}
	}
	return build(lo)
}

func base(name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "node-agent"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: ptr.To(intstr.FromString("100%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "main", Image: "agent"}}},
			},
		},
	}
}

// worstCases are DaemonSets at the API server's size limit, each shaped to
// make one kind of generated check work hardest: the most containers, the
// most mounts against the most hostPath volumes, the most tolerations and
// node selector terms, the most annotation bytes, the longest strings.
func worstCases(t testing.TB) map[string]*appsv1.DaemonSet {
	t.Helper()
	container := func(i int) corev1.Container {
		return corev1.Container{
			Name: fmt.Sprintf("c%d", i), Image: "r/i",
			Ports:           []corev1.ContainerPort{{ContainerPort: 1, HostPort: 1}},
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			VolumeMounts:    []corev1.VolumeMount{{Name: "v", MountPath: "/m"}},
		}
	}
	return map[string]*appsv1.DaemonSet{
		"containers": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("containers")
			ds.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			for i := range n {
				ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, container(i))
			}
			return ds
		}),
		"sidecars": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("sidecars")
			ds.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			for i := range n {
				sidecar := container(i)
				sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				ds.Spec.Template.Spec.InitContainers = append(ds.Spec.Template.Spec.InitContainers, sidecar)
			}
			return ds
		}),
		"mounts-and-volumes": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("mounts-and-volumes")
			spec := &ds.Spec.Template.Spec
			for i := range n {
				name := fmt.Sprintf("v%d", i)
				spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/x"}}})
				spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/m" + name})
			}
			return ds
		}),
		"tolerations-and-affinity": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("tolerations-and-affinity")
			spec := &ds.Spec.Template.Spec
			var terms []corev1.NodeSelectorTerm
			for i := range n {
				spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: fmt.Sprintf("k%d", i), Operator: corev1.TolerationOpExists})
				terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}})
			}
			spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
			return ds
		}),
		// The API server allows 256 KiB of annotations in total.
		"annotations": func() *appsv1.DaemonSet {
			ds := base("annotations")
			ds.Annotations = map[string]string{}
			long := strings.Repeat("a;", 60<<10) + " expires=2099-01-01"
			for _, rule := range []string{"control-plane-toleration", "privileged"} {
				ds.Annotations["exempt.dsguard.io/"+rule] = long
			}
			for i := 0; i < 1500; i++ {
				ds.Annotations[fmt.Sprintf("exempt.dsguard.io/r%d", i)] = "; expires=2099-02-30"
			}
			return ds
		}(),
		"long-strings": func() *appsv1.DaemonSet {
			ds := base("long-strings")
			ds.Spec.Template.Spec.Containers[0].Image = strings.Repeat("r/", 700<<10) + "i"
			ds.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: strings.Repeat("/x", 350<<10)}}}}
			ds.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/m"}}
			return ds
		}(),
	}
}

const costPolicy = `apiVersion: dsguard.io/v1alpha1
kind: PolicyConfig
namespaceEnforcement: [{namespaces: ["kube-*", "sandbox-?"], enforcement: warn}]
bypass: {users: [break-glass], groups: [oncall]}
rules:
  control-plane-toleration:
    parameters: {taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}, {key: node-role.kubernetes.io/master, effect: NoExecute}]}
    scope: {namespaces: {include: ["team-*", fixtures], exclude: ["team-x*"]}, selector: {matchExpressions: [{key: skip, operator: DoesNotExist}]}}
  surge-host-port: {action: deny}
  max-unavailable: {action: deny, parameters: {maxPercent: 10, maxCount: 2}}
  readiness-probe: {action: deny}
  host-path-read-only: {action: deny, parameters: {allowWritable: [/var/lib/agent, /etc/cni/net.d]}}
  privileged: {action: deny}
  image-pinned: {action: deny, parameters: {requireDigest: false}}
  update-strategy: {action: deny}
  invalid-annotation: {action: deny}
`

// TestRender_CostStaysUnderTheAPIServersLimits evaluates every generated
// policy, as CREATE and as UPDATE, on DaemonSets at the API server's size
// limit, with the API server's own cost accounting, and requires each
// policy's match conditions and validations (messages included) to stay
// under one expression's limit (celconfig.PerCallLimit), itself far below
// the budgets per binding.
func TestRender_CostStaysUnderTheAPIServersLimits(t *testing.T) {
	if !*costTest {
		t.Skip("takes minutes on DaemonSets of 1.5 MiB: run with -args -vap.cost (docs/modes.md)")
	}
	cases := worstCases(t)
	for name, ds := range cases {
		data, _ := json.Marshal(ds)
		t.Logf("worst case %s: %d bytes", name, len(data))
	}
	// Every rule denies, with every parameter set: the costliest form of
	// each check (the deny policies carry the ratcheting comparison).
	cfg, err := rules.Builtin().ParseConfig([]byte(costPolicy))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Render(cfg, Options{Namespace: "dsguard-system", Today: testDay})
	if err != nil {
		t.Fatal(err)
	}
	policies := compileResult(t, res)
	worst := map[string]cost{}
	for caseName, ds := range cases {
		for _, r := range []request{
			{namespace: "fixtures", object: ds},
			{namespace: "fixtures", object: ds, old: ds},
		} {
			start := time.Now()
			attrs := r.attributes()
			for i := range policies {
				c := &policies[i]
				got := measure(t, c, r, attrs)
				w := worst[c.policy.Name]
				if got.expression > w.expression {
					w.expression, w.field = got.expression, got.field+" on "+caseName
				}
				w.matchConditions = max(w.matchConditions, got.matchConditions)
				w.validations = max(w.validations, got.validations)
				worst[c.policy.Name] = w
				if got.expression > celconfig.PerCallLimit || got.matchConditions > celconfig.RuntimeCELCostBudgetMatchConditions ||
					got.validations > celconfig.RuntimeCELCostBudget {
					t.Errorf("policy %s on %s: %+v, above the API server's limits (%d per expression, %d for match conditions, %d per binding)",
						c.policy.Name, caseName, got, celconfig.PerCallLimit, celconfig.RuntimeCELCostBudgetMatchConditions, celconfig.RuntimeCELCostBudget)
				}
			}
			t.Logf("%s (update %v): %s", caseName, r.old != nil, time.Since(start).Round(time.Millisecond))
		}
	}
	names := make([]string, 0, len(worst))
	for n := range worst {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w := worst[n]
		t.Logf("%-45s costliest expression %7d (%s); match conditions %7d; validations and messages %7d",
			n, w.expression, w.field, w.matchConditions, w.validations)
	}
}
