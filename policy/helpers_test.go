package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// testNow is the fixed "now" of every test that judges exemption expiry.
var testNow = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

// newDS returns a DaemonSet that every built-in rule accepts under the
// default policy, changed by the mutators in order: namespace monitoring, one
// container "agent" (image example/agent:v1.2.3) with a readinessProbe,
// RollingUpdate with maxUnavailable 1, and a toleration {operator: Exists}.
func newDS(mutators ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	labels := map[string]string{"app.kubernetes.io/name": "agent"}
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "monitoring", Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{
					MaxUnavailable: new(intstr.FromInt32(1)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "agent",
						Image: "example/agent:v1.2.3",
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)},
						}},
					}},
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				},
			},
		},
	}
	for _, m := range mutators {
		m(ds)
	}
	return ds
}

// Mutators for newDS.

func withTolerations(ts ...corev1.Toleration) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = ts }
}

func withAnnotation(key, value string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		ds.Annotations[key] = value
	}
}

func withStrategyType(t appsv1.DaemonSetUpdateStrategyType) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = t }
}

// withRollingUpdate replaces spec.updateStrategy.rollingUpdate; nil values
// stay unset.
func withRollingUpdate(maxUnavailable, maxSurge *intstr.IntOrString) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{
			MaxUnavailable: maxUnavailable, MaxSurge: maxSurge,
		}
	}
}

func withoutRollingUpdate(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate = nil }

func withHostNetwork(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true }

func withPorts(ports ...corev1.ContainerPort) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Ports = ports }
}

func withContainer(c corev1.Container) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, c)
	}
}

func withInitContainer(c corev1.Container) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.InitContainers = append(ds.Spec.Template.Spec.InitContainers, c)
	}
}

// withAgent changes the first container.
func withAgent(change func(*corev1.Container)) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { change(&ds.Spec.Template.Spec.Containers[0]) }
}

// sidecar makes c a native sidecar: an init container with restartPolicy Always.
func sidecar(c corev1.Container) corev1.Container {
	c.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	return c
}

func withNodeSelector(sel map[string]string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = sel }
}

// withRequiredNodeAffinity sets required node affinity with the given terms,
// which the scheduler ORs.
func withRequiredNodeAffinity(terms ...corev1.NodeSelectorTerm) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

// nodeTerm is a node selector term whose expressions are ANDed.
func nodeTerm(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func nodeReq(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func withVolume(v corev1.Volume) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes, v) }
}

func hostPathVolume(name, path string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
}

func intOrInt(i int32) *intstr.IntOrString     { return new(intstr.FromInt32(i)) }
func intOrString(s string) *intstr.IntOrString { return new(intstr.FromString(s)) }

// testEnv is the environment of direct check calls: the built-in policy
// (as Evaluate would hand in) and the fixed time.
func testEnv() *Env { return &Env{Policy: Rules().Default(), Now: testNow} }

// wantFinding describes an expected finding: the exact field path, the action
// the check itself sets ("" for none), what the message must start with
// (prefix, "" for anything), fragments it must contain (msg) and fragments it
// must not contain (absent).
type wantFinding struct {
	field  string
	action Action
	prefix string
	msg    []string
	absent []string
}

// assertFindings compares findings in order against the expectations.
func assertFindings(t *testing.T, got []Finding, want []wantFinding) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d findings, want %d:\n%s", len(got), len(want), describeFindings(got))
	}
	for i, w := range want {
		g := got[i]
		if g.FieldString() != w.field {
			t.Errorf("finding %d: field %q, want %q", i, g.FieldString(), w.field)
		}
		if g.Action != w.action {
			t.Errorf("finding %d: action %q, want %q", i, g.Action, w.action)
		}
		if !strings.HasPrefix(g.Message, w.prefix) {
			t.Errorf("finding %d: message %q does not start with %q", i, g.Message, w.prefix)
		}
		for _, frag := range w.msg {
			if !strings.Contains(g.Message, frag) {
				t.Errorf("finding %d: message %q does not contain %q", i, g.Message, frag)
			}
		}
		for _, frag := range w.absent {
			if strings.Contains(g.Message, frag) {
				t.Errorf("finding %d: message %q contains %q", i, g.Message, frag)
			}
		}
		if strings.Contains(g.Message, "\n") {
			t.Errorf("finding %d: message spans lines (warnings with a newline are dropped): %q", i, g.Message)
		}
	}
}

// assertFieldErrors checks that a validation result names exactly these
// field paths (in order) with the given error types.
func assertFieldErrors(t *testing.T, errs field.ErrorList, want []fieldErr) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if errs[i].Field != w.field || errs[i].Type != w.typ {
			t.Errorf("error %d: %s %s, want %s %s", i, errs[i].Field, errs[i].Type, w.field, w.typ)
		}
		if w.detail != "" && !strings.Contains(errs[i].Detail, w.detail) {
			t.Errorf("error %d: detail %q does not contain %q", i, errs[i].Detail, w.detail)
		}
	}
}

type fieldErr struct {
	field  string
	typ    field.ErrorType
	detail string
}

// compileErr compiles cfg and expects a ConfigError naming field.
func compileErr(t *testing.T, cfg *Config, fieldPath string) {
	t.Helper()
	_, err := Compile(cfg)
	if err == nil {
		t.Fatalf("Compile accepted the config, want an error at %s", fieldPath)
	}
	ce, ok := err.(*ConfigError)
	if !ok {
		t.Fatalf("Compile error %T %v, want *ConfigError", err, err)
	}
	if !slices.ContainsFunc(ce.Problems, func(p ConfigProblem) bool { return p.Field == fieldPath }) {
		t.Errorf("Compile error %v does not name %s", err, fieldPath)
	}
}

func describeFindings(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.RuleID + " " + string(f.Action) + " " + f.FieldString() + ": " + f.Message + "\n")
	}
	return b.String()
}

// findingsOf returns the findings of one rule.
func findingsOf(fs []Finding, ruleID string) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.RuleID == ruleID {
			out = append(out, f)
		}
	}
	return out
}

// TestNewDSIsCompliant guards the builder: every rule test starts from a
// DaemonSet that no rule flags.
func TestNewDSIsCompliant(t *testing.T) {
	if fs := Evaluate(newDS(), Env{Policy: Rules().Default(), Now: testNow}); len(fs) > 0 {
		t.Fatalf("newDS() is not compliant:\n%s", describeFindings(fs))
	}
}

// Node builders for the coverage tests.

// newNode returns a Linux amd64 node whose hostname label is its name,
// changed by the options in order.
func newNode(name string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// nodeLabels sets labels from key, value pairs; an empty value sets the label
// to "".
func nodeLabels(kv ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

// withoutNodeLabel removes a label (also the default hostname, OS or arch).
func withoutNodeLabel(key string) func(*corev1.Node) {
	return func(n *corev1.Node) { delete(n.Labels, key) }
}

func nodeTaints(ts ...corev1.Taint) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, ts...) }
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func taintOf(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

func noSchedule(key string) corev1.Taint { return taintOf(key, "", corev1.TaintEffectNoSchedule) }
func noExecute(key string) corev1.Taint  { return taintOf(key, "", corev1.TaintEffectNoExecute) }

// controlPlaneNode is a control-plane node with the kubeadm label and taint.
func controlPlaneNode(name string, opts ...func(*corev1.Node)) *corev1.Node {
	return newNode(name, append([]func(*corev1.Node){
		nodeLabels(cpKey, ""), nodeTaints(noSchedule(cpKey)),
	}, opts...)...)
}

// poolNodes returns count nodes named prefix-1 … prefix-count, each built
// with opts.
func poolNodes(prefix string, count int, opts ...func(*corev1.Node)) []*corev1.Node {
	out := make([]*corev1.Node, count)
	for i := range out {
		out[i] = newNode(fmt.Sprintf("%s-%d", prefix, i+1), opts...)
	}
	return out
}

// snapshotOf builds a snapshot of nodes given as *corev1.Node,
// []*corev1.Node or []any of those.
func snapshotOf(nodes ...any) *NodeSnapshot { return NewNodeSnapshot(flattenNodes(nodes)) }

func flattenNodes(nodes []any) []*corev1.Node {
	var all []*corev1.Node
	for _, n := range nodes {
		switch n := n.(type) {
		case *corev1.Node:
			all = append(all, n)
		case []*corev1.Node:
			all = append(all, n...)
		case []any:
			all = append(all, flattenNodes(n)...)
		default:
			panic(fmt.Sprintf("snapshotOf: %T", n))
		}
	}
	return all
}

// nodeEnv is testEnv with nodes.
func nodeEnv(nodes *NodeSnapshot) *Env {
	env := testEnv()
	env.Nodes = nodes
	return env
}

func withNodeName(name string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = name }
}

func withNamespace(ns string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Namespace = ns }
}
