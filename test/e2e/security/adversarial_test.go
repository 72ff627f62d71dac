package security

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestEvasion_ThroughTheAPIServer replays the ways a DaemonSet author may
// try to get a DaemonSet without the control-plane toleration past dsguard,
// each with kubectl --dry-run=server through the real API server; each must
// be refused with a reason, none admitted silently.
func TestEvasion_ThroughTheAPIServer(t *testing.T) {
	day := func(days int) string { return time.Now().UTC().AddDate(0, 0, days).Format(time.DateOnly) }
	affinity := func(reqs ...corev1.NodeSelectorRequirement) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}}}
		}
	}
	annotate := func(k, v string) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) { ds.Annotations = map[string]string{k: v} }
	}
	manyTerms := func(ds *appsv1.DaemonSet) {
		terms := make([]corev1.NodeSelectorTerm, 1001)
		for i := range terms {
			terms[i] = corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{fmt.Sprintf("worker-%d", i)}}}}
		}
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	tests := []struct {
		name   string
		change func(*appsv1.DaemonSet)
		denied bool
		says   []string // fragments of kubectl's output
	}{
		{"a one-word self-exemption without expiry", annotate("exempt.dsguard.io/control-plane-toleration", "because"), true,
			[]string{"[control-plane-toleration]", "has no expiry, so it is void"}},
		{"a self-exemption for five years", annotate("exempt.dsguard.io/control-plane-toleration", "because; expires="+day(5*365)), true,
			[]string{"[control-plane-toleration]", "more than 90 days away, so it is void"}},
		{"coverage.dsguard.io/intended as an off switch", annotate("coverage.dsguard.io/intended", "we do not care"), true,
			[]string{"[control-plane-toleration]"}},
		{"required affinity kubernetes.io/hostname Exists", affinity(corev1.NodeSelectorRequirement{
			Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpExists}), true, []string{"[control-plane-toleration]", "skips cp-1"}},
		{"NotIn [fargate]", affinity(corev1.NodeSelectorRequirement{
			Key: "eks.amazonaws.com/compute-type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"fargate"}}), true,
			[]string{"[control-plane-toleration]"}},
		{"DoesNotExist of an unrelated label", affinity(corev1.NodeSelectorRequirement{
			Key: "example.com/never", Operator: corev1.NodeSelectorOpDoesNotExist}), true, []string{"[control-plane-toleration]"}},
		{"1,001 affinity terms", manyTerms, true, []string{"[placement-size]", "affinity too large to judge: 1001 terms; limit 1000"}},
		{"an exemption within 90 days is honoured, and recorded", annotate("exempt.dsguard.io/control-plane-toleration",
			"migration OPS-1; expires="+day(30)), false, nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := example(t, "node-exporter.yaml", fmt.Sprintf("evasion-%d", i), "team-b")
			tt.change(ds)
			r := kubectl(t, toYAML(t, ds), "apply", "--dry-run=server", "-f", "-")
			if tt.denied != (r.ExitCode != 0) {
				t.Fatalf("denied = %v, want %v:\n%s", r.ExitCode != 0, tt.denied, r.Stderr)
			}
			for _, s := range tt.says {
				if !strings.Contains(r.Stderr, s) {
					t.Errorf("kubectl's output lacks %q:\n%s", s, r.Stderr)
				}
			}
		})
	}
}

// TestVerdicts_NameNodesOnlyToTheAPIServer: through the API server (which
// presents its client certificate) the deny names cp-1; a Pod calling the
// webhook port directly gets the same verdict with a count instead.
func TestVerdicts_NameNodesOnlyToTheAPIServer(t *testing.T) {
	ds := example(t, "node-exporter.yaml", "recon", "team-b")
	r := kubectl(t, toYAML(t, ds), "apply", "--dry-run=server", "-f", "-")
	if !strings.Contains(r.Stderr, "skips cp-1") {
		t.Fatalf("through the API server the deny should name cp-1:\n%s", r.Stderr)
	}
	raw, err := json.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	review, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "recon-1",
			Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"},
			Namespace: "team-b", Name: "recon", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}},
	})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Post(cluster.WebhookURL+"/validate-daemonset", "application/json", bytes.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	msg := out.Response.Result.Message
	if out.Response.Allowed || strings.Contains(msg, "cp-1") || !strings.Contains(msg, "skips 1 node") {
		t.Errorf("a direct, unauthenticated caller: want the deny without node names, got allowed=%v:\n%s", out.Response.Allowed, msg)
	}
}

// TestPolicyTampering_SaidOutLoud: a weakened policy is admitted with a
// warning, a deleted one with a warning, and the last good policy stays in
// force after the deletion.
func TestPolicyTampering_SaidOutLoud(t *testing.T) {
	weak := policyConfigMap("bypass:\n  groups: [system:authenticated]\n")
	// The chart's policy ConfigMap, to restore afterwards.
	defer restoreChartPolicy(t, chartPolicyManifest(t))
	r := kubectl(t, weak, "apply", "--dry-run=server", "-f", "-")
	if r.ExitCode != 0 || !strings.Contains(r.Stderr, "weaker than the baseline: bypass.groups has system:authenticated") {
		t.Errorf("a bypass for every authenticated user: want admitted with a warning, got exit %d:\n%s", r.ExitCode, r.Stderr)
	}
	// Weakenings that keep every rule on deny in name: judged on their
	// scopes, parameters and namespace globs.
	for _, c := range []struct{ name, doc, want string }{
		{"no taint to tolerate", "rules:\n  control-plane-toleration:\n    parameters: {taints: []}\n",
			"rules whose parameters void them: rules.control-plane-toleration.parameters.taints"},
		{"a scope that excludes every namespace", "rules:\n  surge-host-port:\n    scope: {namespaces: {exclude: ['*']}}\n",
			"deny rules that apply nowhere: rules.surge-host-port.scope excludes every namespace"},
		{"globs that together match every namespace", "namespaceEnforcement:\n  - namespaces: ['[a-m]*', '[n-z]*', '[0-9]*']\n    enforcement: warn\n",
			"caps every namespace at warn"},
	} {
		if r := kubectl(t, policyConfigMap(c.doc), "apply", "--dry-run=server", "-f", "-"); r.ExitCode != 0 || !strings.Contains(r.Stderr, "weaker than the baseline") || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%s: want admitted with a warning naming %q, got exit %d:\n%s", c.name, c.want, r.ExitCode, r.Stderr)
		}
	}
	d := kubectl(t, "", "delete", "configmap", "dsguard-policy", "-n", framework.Namespace)
	if d.ExitCode != 0 || !strings.Contains(d.Stderr, "keeps enforcing the last good policy") {
		t.Errorf("deleting the policy: want a warning, got exit %d:\n%s", d.ExitCode, d.Stderr)
	}
	// The deny still stands afterwards (the last good policy, not a gap).
	ds := example(t, "node-exporter.yaml", "after-delete", "team-b")
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := kubectl(t, toYAML(t, ds), "apply", "--dry-run=server", "-f", "-")
		if a.ExitCode != 0 && strings.Contains(a.Stderr, "[control-plane-toleration]") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deleting the policy ConfigMap the deny no longer stands:\n%s", a.Stderr)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestPolicyWeakening_WarnedOnApply: kubectl apply of a policy that turns a
// deny rule to warn prints a Warning naming the change against the policy
// it replaces; writing the same again lowers nothing more and says nothing
// about a change (kubectl replace, because apply of an unchanged object
// sends no request and would prove nothing).
func TestPolicyWeakening_WarnedOnApply(t *testing.T) {
	lowered := policyConfigMap("rules:\n  surge-host-port: {action: warn}\n")
	defer restoreChartPolicy(t, chartPolicyManifest(t))
	const want = "dsguard: this policy change lowers enforcement: rules.surge-host-port.action deny → warn: "
	r := kubectl(t, lowered, "apply", "-f", "-")
	var got []string
	for _, w := range warnings(r) {
		if strings.Contains(w, "lowers enforcement") {
			got = append(got, w)
		}
	}
	if r.ExitCode != 0 || len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("a deny rule turned to warn: want admitted with one Warning starting %q, got exit %d:\n%s", want, r.ExitCode, r.Stderr)
	}
	// dsguard, loading it, tells whoever watches the Events too.
	var events string
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		events = kubectl(t, "", "get", "events", "-n", framework.Namespace, "--field-selector", "reason=PolicyWeakened",
			"-o", "jsonpath={range .items[*]}{.type} {.message}{\"\\n\"}{end}").Stdout
		return strings.Contains(events, "Warning policy generation") && strings.Contains(events, "rules.surge-host-port.action deny → warn")
	}, func() string { return "no PolicyWeakened Warning Event naming the change; events:\n" + events })
	// The baseline's warning shows the webhook judged the write.
	again := kubectl(t, lowered, "replace", "-f", "-")
	if again.ExitCode != 0 || !strings.Contains(again.Stderr, "weaker than the baseline") || strings.Contains(again.Stderr, "lowers enforcement") {
		t.Errorf("the same policy again: want only the baseline's Warning, none about lowering, got exit %d:\n%s", again.ExitCode, again.Stderr)
	}
}
