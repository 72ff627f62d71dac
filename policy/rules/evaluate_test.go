package rules

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

// sampleDaemonSet returns a DaemonSet that every built-in rule accepts: it
// tolerates the control-plane taint, rolls out one node at a time without
// surge, probes readiness, pins its image and mounts host paths read-only.
func sampleDaemonSet() *appsv1.DaemonSet {
	maxUnavailable := intstr.FromInt32(1)
	maxSurge := intstr.FromInt32(0)
	labels := map[string]string{"app.kubernetes.io/name": "log-agent"}
	return &appsv1.DaemonSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "log-agent",
			Namespace: "logging",
			Labels:    map[string]string{"app.kubernetes.io/name": "log-agent", "tier": "node-agent"},
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{
					MaxUnavailable: &maxUnavailable,
					MaxSurge:       &maxSurge,
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
					Tolerations: []corev1.Toleration{{
						Key:      "node-role.kubernetes.io/control-plane",
						Operator: corev1.TolerationOpExists,
						Effect:   corev1.TaintEffectNoSchedule,
					}},
					Containers: []corev1.Container{{
						Name:  "agent",
						Image: "registry.example.com:5000/log-agent:v2.3.1",
						Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 2020}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("metrics")},
						}},
						VolumeMounts: []corev1.VolumeMount{{Name: "varlog", MountPath: "/var/log", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{
						Name:         "varlog",
						VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}},
					}},
				},
			},
		},
	}
}

// nodeExporterDaemonSet returns a node-exporter as often first written: no
// tolerations (so it skips the control plane), a :latest image, no readiness
// probe and a writable mount of the host's root.
func nodeExporterDaemonSet() *appsv1.DaemonSet {
	labels := map[string]string{"app.kubernetes.io/name": "node-exporter"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "node-exporter", Namespace: "monitoring", Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork: true,
					HostPID:     true,
					Containers: []corev1.Container{{
						Name:  "node-exporter",
						Image: "quay.io/prometheus/node-exporter:latest",
						Args:  []string{"--path.rootfs=/host"},
						Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100, HostPort: 9100}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "root", MountPath: "/host"},
							{Name: "sys", MountPath: "/host/sys", ReadOnly: true},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
						{Name: "sys", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/sys"}}},
					},
				},
			},
		},
	}
}

// mustParsePolicy compiles configHeader + doc.
func mustParsePolicy(t testing.TB, doc string) *policy.Policy {
	t.Helper()
	p, err := Builtin().Parse([]byte(configHeader + doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

// verdict is the part of a finding most tests compare.
type verdict struct {
	Rule   string
	Action policy.Action
}

func verdicts(fs []policy.Finding) []verdict {
	out := make([]verdict, len(fs))
	for i, f := range fs {
		out[i] = verdict{f.RuleID, f.Action}
	}
	return out
}

// actionOf returns the action of the rule's finding, "" when there is none.
func actionOf(fs []policy.Finding, ruleID string) policy.Action {
	for _, f := range fs {
		if f.RuleID == ruleID {
			return f.Action
		}
	}
	return ""
}

func inNamespace(ds *appsv1.DaemonSet, ns string) *appsv1.DaemonSet {
	ds.Namespace = ns
	return ds
}

var evalNow = time.Date(2026, time.March, 15, 12, 0, 0, 0, time.UTC)

func TestEvaluateCompliant(t *testing.T) {
	if fs := policy.Evaluate(sampleDaemonSet(), policy.Env{Policy: Builtin().Default(), Now: evalNow}); len(fs) != 0 {
		t.Errorf("compliant DaemonSet has findings: %+v", fs)
	}
}

func TestEvaluateSorted(t *testing.T) {
	ds := nodeExporterDaemonSet()
	// A second container without a probe, a writable mount and a :latest
	// image: several findings per rule, to be ordered by field.
	ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, corev1.Container{
		Name:         "kube-rbac-proxy",
		Image:        "quay.io/brancz/kube-rbac-proxy",
		VolumeMounts: []corev1.VolumeMount{{Name: "root", MountPath: "/host"}},
	})
	fs := policy.Evaluate(ds, policy.Env{Policy: Builtin().Default(), Now: evalNow})
	want := []struct {
		verdict
		field string
	}{
		{verdict{controlPlaneTolerationID, policy.ActionDeny}, "spec.template.spec.tolerations"},
		{verdict{hostPathReadOnlyID, policy.ActionWarn}, "spec.template.spec.containers[0].volumeMounts[0].readOnly"},
		{verdict{hostPathReadOnlyID, policy.ActionWarn}, "spec.template.spec.containers[1].volumeMounts[0].readOnly"},
		{verdict{imagePinnedID, policy.ActionWarn}, "spec.template.spec.containers[0].image"},
		{verdict{imagePinnedID, policy.ActionWarn}, "spec.template.spec.containers[1].image"},
		{verdict{readinessProbeID, policy.ActionWarn}, "spec.template.spec.containers[0].readinessProbe"},
		{verdict{readinessProbeID, policy.ActionWarn}, "spec.template.spec.containers[1].readinessProbe"},
	}
	if len(fs) != len(want) {
		t.Fatalf("got %d findings, want %d:\n%s", len(fs), len(want), findingList(fs))
	}
	for i, w := range want {
		f := fs[i]
		if f.RuleID != w.Rule || f.Action != w.Action || f.FieldString() != w.field {
			t.Errorf("finding %d = %s %s %s, want %s %s %s", i, f.Action, f.RuleID, f.FieldString(), w.Action, w.Rule, w.field)
		}
		if f.Message == "" || f.Remediation == "" || f.Exempted != "" {
			t.Errorf("finding %d: message %q remediation %q exempted %q", i, f.Message, f.Remediation, f.Exempted)
		}
	}

	// SortFindings alone: audit after warn after deny, then rule; one
	// rule's findings keep the order the rule reported them in.
	shuffled := []policy.Finding{
		{RuleID: "b", Action: policy.ActionAudit},
		{RuleID: "b", Action: policy.ActionWarn, Message: "2"},
		{RuleID: "a", Action: policy.ActionWarn},
		{RuleID: "b", Action: policy.ActionWarn, Message: "1"},
		{RuleID: "z", Action: policy.ActionDeny},
	}
	policy.SortFindings(shuffled)
	var got []string
	for _, f := range shuffled {
		got = append(got, fmt.Sprintf("%s/%s/%s", f.Action, f.RuleID, f.Message))
	}
	if want := []string{"deny/z/", "warn/a/", "warn/b/2", "warn/b/1", "audit/b/"}; !slices.Equal(got, want) {
		t.Errorf("SortFindings order = %v, want %v", got, want)
	}
}

func findingList(fs []policy.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %s %s %s: %s\n", f.Action, f.RuleID, f.FieldString(), f.Message)
	}
	return b.String()
}

func TestEvaluateEnforcement(t *testing.T) {
	nodeExporter := []verdict{
		{controlPlaneTolerationID, policy.ActionDeny},
		{hostPathReadOnlyID, policy.ActionWarn},
		{imagePinnedID, policy.ActionWarn},
		{readinessProbeID, policy.ActionWarn},
	}
	// allAt is the node-exporter DaemonSet's four findings when the
	// enforcement level caps every one of them at a.
	allAt := func(a policy.Action) []verdict {
		return []verdict{
			{controlPlaneTolerationID, a},
			{hostPathReadOnlyID, a},
			{imagePinnedID, a},
			{readinessProbeID, a},
		}
	}
	tests := []struct {
		name      string
		policy    string
		namespace string
		want      []verdict
	}{{
		name:      "default policy enforces outside kube-system",
		namespace: "monitoring",
		want:      nodeExporter,
	}, {
		name:      "kube-system never denies by default",
		namespace: "kube-system",
		want:      allAt(policy.ActionWarn),
	}, {
		name:      "enforcement warn turns deny into warn",
		policy:    "enforcement: warn\n",
		namespace: "monitoring",
		want:      allAt(policy.ActionWarn),
	}, {
		name:      "enforcement audit records everything",
		policy:    "enforcement: audit\n",
		namespace: "monitoring",
		want:      allAt(policy.ActionAudit),
	}, {
		name:      "namespace enforcement cannot raise the global level",
		policy:    "enforcement: warn\nnamespaceEnforcement: [{namespaces: [monitoring], enforcement: enforce}]\n",
		namespace: "monitoring",
		want:      allAt(policy.ActionWarn),
	}, {
		name:      "namespace audit",
		policy:    "namespaceEnforcement: [{namespaces: [monitoring], enforcement: audit}]\n",
		namespace: "monitoring",
		want:      allAt(policy.ActionAudit),
	}, {
		name:      "replacing namespaceEnforcement drops the kube-system default",
		policy:    "namespaceEnforcement: [{namespaces: [monitoring], enforcement: audit}]\n",
		namespace: "kube-system",
		want:      nodeExporter,
	}, {
		name:      "a rule's own action",
		policy:    "rules:\n  control-plane-toleration: {action: audit}\n  image-pinned: {action: deny}\n",
		namespace: "monitoring",
		want: []verdict{
			{imagePinnedID, policy.ActionDeny},
			{hostPathReadOnlyID, policy.ActionWarn},
			{readinessProbeID, policy.ActionWarn},
			{controlPlaneTolerationID, policy.ActionAudit},
		},
	}, {
		name:      "action off",
		policy:    "rules:\n  control-plane-toleration: {action: off}\n  readiness-probe: {action: \"off\"}\n",
		namespace: "monitoring",
		want: []verdict{
			{hostPathReadOnlyID, policy.ActionWarn},
			{imagePinnedID, policy.ActionWarn},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParsePolicy(t, tt.policy)
			fs := policy.Evaluate(inNamespace(nodeExporterDaemonSet(), tt.namespace), policy.Env{Policy: p, Now: evalNow})
			if got := verdicts(fs); !slices.Equal(got, tt.want) {
				t.Errorf("verdicts =\n  %v\nwant\n  %v", got, tt.want)
			}
		})
	}
}

func TestEvaluateNamespaceEnforcementFirstMatchWins(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		want   map[string]policy.Action // namespace → control-plane-toleration action
	}{{
		name: "specific entry first",
		policy: `namespaceEnforcement:
- namespaces: [team-a]
  enforcement: enforce
- namespaces: ["team-*", kube-system]
  enforcement: audit
`,
		want: map[string]policy.Action{"team-a": policy.ActionDeny, "team-b": policy.ActionAudit, "kube-system": policy.ActionAudit, "other": policy.ActionDeny},
	}, {
		name: "glob entry first",
		policy: `namespaceEnforcement:
- namespaces: ["team-*"]
  enforcement: audit
- namespaces: [team-a]
  enforcement: enforce
`,
		want: map[string]policy.Action{"team-a": policy.ActionAudit, "team-b": policy.ActionAudit, "kube-system": policy.ActionDeny},
	}, {
		name: "warn before audit",
		policy: `namespaceEnforcement:
- namespaces: ["*-system"]
  enforcement: warn
- namespaces: [kube-system]
  enforcement: audit
`,
		want: map[string]policy.Action{"kube-system": policy.ActionWarn, "dsguard-system": policy.ActionWarn, "default": policy.ActionDeny},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParsePolicy(t, tt.policy)
			for ns, want := range tt.want {
				fs := policy.Evaluate(inNamespace(nodeExporterDaemonSet(), ns), policy.Env{Policy: p, Now: evalNow})
				if got := actionOf(fs, controlPlaneTolerationID); got != want {
					t.Errorf("in %s: control-plane-toleration %q, want %q", ns, got, want)
				}
			}
		})
	}
}

func TestEvaluateScope(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		// cases maps a namespace (and optional ",label=value") to whether
		// readiness-probe reports.
		cases map[string]bool
	}{{
		name:   "include glob",
		policy: "rules:\n  readiness-probe:\n    scope: {namespaces: {include: [\"team-*\"]}}\n",
		cases:  map[string]bool{"team-a": true, "team-": true, "teams": false, "monitoring": false, "default": false},
	}, {
		name:   "exclude glob",
		policy: "rules:\n  readiness-probe:\n    scope: {namespaces: {exclude: [\"team-*\", kube-system]}}\n",
		cases:  map[string]bool{"team-a": false, "kube-system": false, "monitoring": true},
	}, {
		name:   "exclude beats include",
		policy: "rules:\n  readiness-probe:\n    scope: {namespaces: {include: [\"team-*\"], exclude: [team-legacy]}}\n",
		cases:  map[string]bool{"team-a": true, "team-legacy": false, "monitoring": false},
	}, {
		name:   "character class and single-character globs",
		policy: "rules:\n  readiness-probe:\n    scope: {namespaces: {include: [\"prod-[ab]\", \"dev-?\"]}}\n",
		cases:  map[string]bool{"prod-a": true, "prod-c": false, "dev-1": true, "dev-12": false},
	}, {
		name:   "empty namespace is default",
		policy: "rules:\n  readiness-probe:\n    scope: {namespaces: {include: [default]}}\n",
		cases:  map[string]bool{"": true, "default": true, "monitoring": false},
	}, {
		name:   "label selector",
		policy: "rules:\n  readiness-probe:\n    scope: {selector: {matchLabels: {tier: node-agent}}}\n",
		cases:  map[string]bool{"monitoring,tier=node-agent": true, "monitoring,tier=other": false, "monitoring": false},
	}, {
		name: "label selector expression",
		policy: `rules:
  readiness-probe:
    scope:
      selector:
        matchExpressions:
        - {key: dsguard.example.com/legacy, operator: DoesNotExist}
`,
		cases: map[string]bool{"monitoring": true, "monitoring,dsguard.example.com/legacy=yes": false},
	}, {
		name:   "selector and namespaces both apply",
		policy: "rules:\n  readiness-probe:\n    scope: {namespaces: {include: [monitoring]}, selector: {matchLabels: {tier: node-agent}}}\n",
		cases:  map[string]bool{"monitoring,tier=node-agent": true, "other,tier=node-agent": false, "monitoring": false},
	}, {
		name:   "empty selector matches everything",
		policy: "rules:\n  readiness-probe:\n    scope: {selector: {}}\n",
		cases:  map[string]bool{"monitoring": true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParsePolicy(t, tt.policy)
			for c, want := range tt.cases {
				ns, label, _ := strings.Cut(c, ",")
				ds := inNamespace(nodeExporterDaemonSet(), ns)
				if k, v, ok := strings.Cut(label, "="); ok {
					ds.Labels = map[string]string{k: v}
				}
				fs := policy.Evaluate(ds, policy.Env{Policy: p, Now: evalNow})
				if got := actionOf(fs, readinessProbeID) != ""; got != want {
					t.Errorf("%q: readiness-probe reported %v, want %v", c, got, want)
				}
				// Other rules are not scoped.
				if actionOf(fs, imagePinnedID) == "" {
					t.Errorf("%q: image-pinned did not report", c)
				}
			}
		})
	}
}

func TestEvaluateEmptyNamespaceIsDefault(t *testing.T) {
	p := mustParsePolicy(t, "namespaceEnforcement: [{namespaces: [default], enforcement: audit}]\n")
	for _, ns := range []string{"", "default"} {
		fs := policy.Evaluate(inNamespace(nodeExporterDaemonSet(), ns), policy.Env{Policy: p, Now: evalNow})
		if got := actionOf(fs, controlPlaneTolerationID); got != policy.ActionAudit {
			t.Errorf("namespace %q: control-plane-toleration %q, want audit", ns, got)
		}
	}
}

func TestEvaluateExemptions(t *testing.T) {
	const key = policy.ExemptionAnnotationPrefix + controlPlaneTolerationID
	tests := []struct {
		name        string
		policy      string
		annotations map[string]string
		want        policy.Action // control-plane-toleration
		exempted    string
		// invalid is whether invalid-annotation reports the exemption.
		invalid bool
		// requester and previous are the admission request's user and the
		// stored object's annotations.
		requester *policy.Requester
		previous  map[string]string
	}{{
		name: "no exemption",
		want: policy.ActionDeny,
	}, {
		name:        "no expiry: void for a deny rule",
		annotations: map[string]string{key: "control-plane nodes are scraped by the cloud provider"},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "expiry further than maxExemptionDays: void",
		annotations: map[string]string{key: "migrating; expires=2026-06-14"},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "expiry exactly maxExemptionDays away",
		annotations: map[string]string{key: "migrating; expires=2026-06-13"},
		want:        policy.ActionAudit,
		exempted:    "migrating",
	}, {
		name:        "a longer maxExemptionDays from the policy",
		policy:      "exemptions: {maxExemptionDays: 365}\n",
		annotations: map[string]string{key: "migrating; expires=2027-01-01"},
		want:        policy.ActionAudit,
		exempted:    "migrating",
	}, {
		name:        "a rule lowered to warn takes an exemption without expiry",
		policy:      "rules:\n  control-plane-toleration: {action: warn}\n",
		annotations: map[string]string{key: "we know"},
		want:        policy.ActionAudit,
		exempted:    "we know",
	}, {
		name:        "namespace outside allowedNamespaces: void",
		policy:      "exemptions: {allowedNamespaces: [platform-*]}\n",
		annotations: map[string]string{key: "migrating; expires=2026-04-01"},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "requester outside allowedGroups adds it: void",
		policy:      "exemptions: {allowedGroups: [platform-team]}\n",
		annotations: map[string]string{key: "migrating; expires=2026-04-01"},
		requester:   &policy.Requester{Username: "mallory", Groups: []string{"system:authenticated", "team-a"}},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "requester in allowedGroups",
		policy:      "exemptions: {allowedGroups: [platform-team]}\n",
		annotations: map[string]string{key: "migrating; expires=2026-04-01"},
		requester:   &policy.Requester{Username: "pat", Groups: []string{"system:authenticated", "platform-team"}},
		want:        policy.ActionAudit,
		exempted:    "migrating",
	}, {
		name:        "an UPDATE that leaves a granted exemption unchanged keeps it",
		policy:      "exemptions: {allowedGroups: [platform-team]}\n",
		annotations: map[string]string{key: "migrating; expires=2026-04-01"},
		previous:    map[string]string{key: "migrating; expires=2026-04-01"},
		requester:   &policy.Requester{Username: "ci-bot", Groups: []string{"system:serviceaccounts"}},
		want:        policy.ActionAudit,
		exempted:    "migrating",
	}, {
		name:        "an UPDATE that extends it by someone else: void",
		policy:      "exemptions: {allowedGroups: [platform-team]}\n",
		annotations: map[string]string{key: "migrating; expires=2026-05-01"},
		previous:    map[string]string{key: "migrating; expires=2026-04-01"},
		requester:   &policy.Requester{Username: "mallory", Groups: []string{"team-a"}},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "offline (no requester) the group gate is not applied",
		policy:      "exemptions: {allowedGroups: [platform-team]}\n",
		annotations: map[string]string{key: "migrating; expires=2026-04-01"},
		want:        policy.ActionAudit,
		exempted:    "migrating",
	}, {
		name:        "expires in the future",
		annotations: map[string]string{key: "migrating to v2 (OPS-123); expires=2026-04-01"},
		want:        policy.ActionAudit,
		exempted:    "migrating to v2 (OPS-123)",
	}, {
		name:        "expires today is still valid",
		annotations: map[string]string{key: "migrating; expires=2026-03-15"},
		want:        policy.ActionAudit,
		exempted:    "migrating",
	}, {
		name:        "expired yesterday",
		annotations: map[string]string{key: "migrating; expires=2026-03-14"},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "empty reason",
		annotations: map[string]string{key: "  "},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "expiry without a reason",
		annotations: map[string]string{key: "expires=2099-01-01"},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "malformed expiry",
		annotations: map[string]string{key: "migrating; expires=next week"},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "misspelt rule ID",
		annotations: map[string]string{policy.ExemptionAnnotationPrefix + "control-plane-tolerations": "reason"},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "forbidden by the policy",
		policy:      "rules:\n  control-plane-toleration: {allowExemptions: false}\n",
		annotations: map[string]string{key: "we know"},
		want:        policy.ActionDeny,
		invalid:     true,
	}, {
		name:        "exemption under enforcement warn",
		policy:      "enforcement: warn\n",
		annotations: map[string]string{key: "we know; expires=2026-04-01"},
		want:        policy.ActionAudit,
		exempted:    "we know",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParsePolicy(t, tt.policy)
			ds := nodeExporterDaemonSet()
			ds.Annotations = tt.annotations
			fs := policy.Evaluate(ds, policy.Env{Policy: p, Now: evalNow, Requester: tt.requester, PreviousAnnotations: tt.previous})
			var cpt *policy.Finding
			for i := range fs {
				if fs[i].RuleID == controlPlaneTolerationID {
					cpt = &fs[i]
				}
			}
			if cpt == nil {
				t.Fatalf("no control-plane-toleration finding:\n%s", findingList(fs))
			}
			if cpt.Action != tt.want || cpt.Exempted != tt.exempted {
				t.Errorf("control-plane-toleration %q exempted %q, want %q exempted %q", cpt.Action, cpt.Exempted, tt.want, tt.exempted)
			}
			if got := actionOf(fs, invalidAnnotationID) != ""; got != tt.invalid {
				t.Errorf("invalid-annotation reported %v, want %v:\n%s", got, tt.invalid, findingList(fs))
			}
			// The exemption covers one rule only.
			if a := actionOf(fs, readinessProbeID); a != policy.ActionWarn {
				t.Errorf("readiness-probe %q, want warn", a)
			}
		})
	}
}

func TestEvaluateExemptionExpiresAtEndOfDay(t *testing.T) {
	ds := nodeExporterDaemonSet()
	ds.Annotations = map[string]string{policy.ExemptionAnnotationPrefix + controlPlaneTolerationID: "reason; expires=2026-03-15"}
	for _, tt := range []struct {
		now  time.Time
		want policy.Action
	}{
		{time.Date(2026, 3, 15, 23, 59, 59, 0, time.UTC), policy.ActionAudit},
		{time.Date(2026, 3, 16, 0, 0, 0, 0, time.UTC), policy.ActionDeny},
		{time.Time{}, policy.ActionDeny}, // no clock: Evaluate judges against the current time
	} {
		fs := policy.Evaluate(ds, policy.Env{Policy: Builtin().Default(), Now: tt.now})
		if got := actionOf(fs, controlPlaneTolerationID); got != tt.want {
			t.Errorf("at %v: %q, want %q", tt.now, got, tt.want)
		}
	}
}

func TestParseExemption(t *testing.T) {
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	tests := []struct {
		value   string
		reason  string
		expires time.Time
		err     string
	}{
		{value: "the reason", reason: "the reason"},
		{value: "  padded  ", reason: "padded"},
		{value: "a; b", reason: "a; b"},
		{value: "reason; expires=2026-03-15", reason: "reason", expires: day(2026, 3, 16)},
		{value: "a; b;expires=2026-12-31", reason: "a; b", expires: day(2027, 1, 1)},
		{value: "reason; Expires = 2026-03-15", reason: "reason", expires: day(2026, 3, 16)},
		{value: "reason; expires: 2026-03-15", reason: "reason", expires: day(2026, 3, 16)},
		{value: "reason; expiresoon", reason: "reason; expiresoon"},
		{value: "", err: "reason is empty"},
		{value: "; expires=2026-03-15", err: "reason is empty"},
		{value: "expires=2026-03-15", err: "reason is empty"},
		{value: "reason; expires=15.03.2026", err: `expiry "15.03.2026" is not a date`},
		{value: "reason; expires=", err: `expiry "" is not a date`},
	}
	for _, tt := range tests {
		e, err := policy.ParseExemption(tt.value)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseExemption(%q) error = %v, want %q", tt.value, err, tt.err)
			}
			continue
		}
		if err != nil || e.Reason != tt.reason || !e.Expires.Equal(tt.expires) {
			t.Errorf("ParseExemption(%q) = %+v, %v; want reason %q expires %v", tt.value, e, err, tt.reason, tt.expires)
		}
	}
}

func TestPolicyBypassed(t *testing.T) {
	p := mustParsePolicy(t, "bypass:\n  users: [alice@example.com, \"system:serviceaccount:flux-system:kustomize\"]\n  groups: [sre-break-glass]\n")
	tests := []struct {
		user   string
		groups []string
		want   bool
	}{
		{"alice@example.com", nil, true},
		{"system:serviceaccount:flux-system:kustomize", []string{"system:serviceaccounts"}, true},
		{"bob@example.com", []string{"dev", "sre-break-glass"}, true},
		{"bob@example.com", []string{"dev", "system:authenticated"}, false},
		{"bob@example.com", nil, false},
		{"Alice@example.com", nil, false},
		{"", nil, false},
	}
	for _, tt := range tests {
		if got := p.Bypassed(tt.user, tt.groups); got != tt.want {
			t.Errorf("Bypassed(%q, %q) = %v, want %v", tt.user, tt.groups, got, tt.want)
		}
	}
	if Builtin().Default().Bypassed("alice@example.com", []string{"system:masters"}) {
		t.Error("the default policy bypasses someone")
	}
}

func TestEvaluateDoesNotMutate(t *testing.T) {
	p := mustParsePolicy(t, "rules:\n  privileged: {scope: {selector: {matchLabels: {app.kubernetes.io/name: node-exporter}}}}\n")
	for name, ds := range map[string]*appsv1.DaemonSet{"compliant": sampleDaemonSet(), "node-exporter": nodeExporterDaemonSet()} {
		ds.Annotations = map[string]string{
			policy.ExemptionAnnotationPrefix + readinessProbeID: "probe comes later; expires=2026-01-01",
			policy.ExemptionAnnotationPrefix + imagePinnedID:    "",
			policy.IntendedCoverageAnnotation:                   "",
		}
		before := ds.DeepCopy()
		fs := policy.Evaluate(ds, policy.Env{Policy: p, Now: evalNow})
		if !reflect.DeepEqual(ds, before) {
			t.Errorf("%s: Evaluate changed the DaemonSet", name)
		}
		// Findings are fresh values: changing them does not reach the next
		// verdict.
		for i := range fs {
			fs[i].Action = policy.ActionOff
			fs[i].Details = append(fs[i].Details, "x")
		}
		if again := policy.Evaluate(ds, policy.Env{Policy: p, Now: evalNow}); slices.ContainsFunc(again, func(f policy.Finding) bool {
			return f.Action == policy.ActionOff || len(f.Details) > 0
		}) {
			t.Errorf("%s: a finding changed by the caller came back", name)
		}
	}
}

func TestEvaluateWithoutPolicyFindsNothing(t *testing.T) {
	if fs := policy.Evaluate(nodeExporterDaemonSet(), policy.Env{Now: evalNow}); len(fs) != 0 {
		t.Errorf("without a policy: %s", findingList(fs))
	}
}

func TestEvaluateDeterministic(t *testing.T) {
	ds := nodeExporterDaemonSet()
	ds.Annotations = map[string]string{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		ds.Annotations[policy.ExemptionAnnotationPrefix+"unknown-"+id] = "reason"
	}
	first := policy.Evaluate(ds, policy.Env{Policy: Builtin().Default(), Now: evalNow})
	for range 20 {
		if again := policy.Evaluate(ds, policy.Env{Policy: Builtin().Default(), Now: evalNow}); !reflect.DeepEqual(first, again) {
			t.Fatalf("verdicts differ between runs:\n%s---\n%s", findingList(first), findingList(again))
		}
	}
}

// TestEvaluateConcurrent shares one Policy between goroutines, as the
// webhook does; run with -race.
func TestEvaluateConcurrent(t *testing.T) {
	p := mustParsePolicy(t, "rules:\n  readiness-probe:\n    scope: {namespaces: {include: [\"mon*\"]}, selector: {matchLabels: {app.kubernetes.io/name: node-exporter}}}\n")
	want := policy.Evaluate(nodeExporterDaemonSet(), policy.Env{Policy: p, Now: evalNow})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got := policy.Evaluate(nodeExporterDaemonSet(), policy.Env{Policy: p, Now: evalNow}); !reflect.DeepEqual(got, want) {
					t.Error("concurrent verdict differs")
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCount(t *testing.T) {
	fs := policy.Evaluate(nodeExporterDaemonSet(), policy.Env{Policy: Builtin().Default(), Now: evalNow})
	if d, w, a := policy.Count(fs, policy.ActionDeny), policy.Count(fs, policy.ActionWarn), policy.Count(fs, policy.ActionAudit); d != 1 || w != 3 || a != 0 {
		t.Errorf("Count deny/warn/audit = %d/%d/%d, want 1/3/0", d, w, a)
	}
}

func TestActionWeaker(t *testing.T) {
	tests := []struct{ a, b, want policy.Action }{
		{policy.ActionDeny, policy.ActionWarn, policy.ActionWarn},
		{policy.ActionWarn, policy.ActionDeny, policy.ActionWarn},
		{policy.ActionAudit, policy.ActionWarn, policy.ActionAudit},
		{policy.ActionDeny, policy.ActionOff, policy.ActionOff},
		{"", policy.ActionWarn, policy.ActionWarn},
		{policy.ActionDeny, "", policy.ActionDeny},
		{policy.ActionDeny, policy.ActionDeny, policy.ActionDeny},
	}
	for _, tt := range tests {
		if got := tt.a.Weaker(tt.b); got != tt.want {
			t.Errorf("%q.Weaker(%q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestEnvCoverage_KeyedOnDaemonSetAndNodes pins that a prediction kept in an
// Env serves only the DaemonSet and the snapshot it was made for: reusing one
// Env for another DaemonSet or other nodes predicts again.
func TestEnvCoverage_KeyedOnDaemonSetAndNodes(t *testing.T) {
	gpu := testobj.Node("gpu-1", testobj.NodeTaints(testobj.NoSchedule("gpu")))
	workers := testobj.PoolNodes("worker", 2)
	env := nodeEnv(snapshotOf(gpu, workers))
	intolerant := testobj.DS(testobj.WithTolerations())
	tolerant := testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists}))

	if got := env.Coverage(intolerant).Eligible; got != 2 {
		t.Fatalf("without the toleration: eligible = %d, want 2", got)
	}
	if got := env.Coverage(tolerant).Eligible; got != 3 {
		t.Errorf("same Env, another DaemonSet: eligible = %d, want 3", got)
	}
	env.Nodes = snapshotOf(workers)
	if got := env.Coverage(tolerant).Eligible; got != 2 {
		t.Errorf("same Env and DaemonSet, other nodes: eligible = %d, want 2", got)
	}
	if a, b := env.Coverage(tolerant), env.Coverage(tolerant); a != b {
		t.Errorf("the same DaemonSet on the same nodes predicted twice")
	}
}
