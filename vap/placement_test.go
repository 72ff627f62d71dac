package vap

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/dsguard/dsguard/webhook"
)

// placementPolicies are control-plane-toleration alone, with the default
// taint and with a taint whose value is an integer (so that Gt and Lt have
// a label to compare on the model nodes).
var placementPolicies = map[string]string{
	"control-plane": `apiVersion: dsguard.io/v1alpha1
kind: PolicyConfig
`,
	"numeric": `apiVersion: dsguard.io/v1alpha1
kind: PolicyConfig
rules:
  control-plane-toleration: {parameters: {taints: [{key: dsguard.io/rack, value: "5", effect: NoSchedule}]}}
`,
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// terms is a required node affinity of the given terms, each a list of
// match expressions.
func terms(ts ...[]corev1.NodeSelectorRequirement) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		sel := &corev1.NodeSelector{}
		for _, t := range ts {
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}}
	}
}

func term(rs ...corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement { return rs }

func fields(rs ...corev1.NodeSelectorRequirement) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: rs}}}}}
	}
}

func selector(kv ...string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			s.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func many[T any](n int, f func(i int) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

const (
	cpKey    = "node-role.kubernetes.io/control-plane"
	rackKey  = "dsguard.io/rack"
	hostname = corev1.LabelHostname
)

// placementCases are placements with whether they reach the model nodes
// that carry the policy's taint. Invalid requirements are among them: the
// scheduler's parser rejects them, so their term matches nothing. Invalid
// keys are not: the API server rejects them before admission, and the
// generated CEL does not check them (docs/modes.md).
var placementCases = []struct {
	name, policy string
	place        func(*corev1.PodSpec)
	reaches      bool
}{
	{name: "no placement", place: func(*corev1.PodSpec) {}, reaches: true},
	{name: "hostname Exists", place: terms(term(req(hostname, corev1.NodeSelectorOpExists))), reaches: true},
	{name: "NotIn fargate", place: terms(term(req("eks.amazonaws.com/compute-type", corev1.NodeSelectorOpNotIn, "fargate"))), reaches: true},
	{name: "DoesNotExist of an unrelated label", place: terms(term(req("dsguard.io/pool", corev1.NodeSelectorOpDoesNotExist))), reaches: true},
	{name: "Windows-only nodeSelector", place: selector(corev1.LabelOSStable, "windows")},
	{name: "Windows-only affinity", place: terms(term(req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "windows")))},
	{name: "Linux nodeSelector", place: selector(corev1.LabelOSStable, "linux"), reaches: true},
	{name: "arm64 by the beta label", place: selector("beta.kubernetes.io/arch", "arm64"), reaches: true},
	{name: "s390x", place: terms(term(req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "s390x")))},
	{name: "a pool label", place: selector("dsguard.io/pool", "gpu")},
	{name: "Linux and a pool label", place: selector(corev1.LabelOSStable, "linux", "dsguard.io/pool", "infra")},
	{name: "the model hostname", place: selector(hostname, coverage.ModelNodeName), reaches: true},
	{name: "control-plane DoesNotExist", place: terms(term(req(cpKey, corev1.NodeSelectorOpDoesNotExist)))},
	{name: "control-plane Exists", place: terms(term(req(cpKey, corev1.NodeSelectorOpExists))), reaches: true},
	{name: "control-plane In empty value", place: terms(term(req(cpKey, corev1.NodeSelectorOpIn, ""))), reaches: true},
	{name: "control-plane nodeSelector", place: selector(cpKey, ""), reaches: true},
	{name: "control-plane NotIn empty value", place: terms(term(req(cpKey, corev1.NodeSelectorOpNotIn, "")))},
	{name: "a GPU term or an amd64 term", place: terms(term(req("dsguard.io/pool", corev1.NodeSelectorOpIn, "gpu")), term(req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))), reaches: true},
	{name: "two pool terms", place: terms(term(req("dsguard.io/pool", corev1.NodeSelectorOpIn, "gpu")), term(req("dsguard.io/pool", corev1.NodeSelectorOpIn, "infra")))},
	{name: "Linux and not arm64 and not amd64", place: terms(term(req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"), req(corev1.LabelArchStable, corev1.NodeSelectorOpNotIn, "arm64", "amd64")))},
	{name: "Gt on a label that is no number", place: terms(term(req(corev1.LabelOSStable, corev1.NodeSelectorOpGt, "1")))},
	{name: "Lt on an absent label", place: terms(term(req("dsguard.io/rack", corev1.NodeSelectorOpLt, "9")))},
	{name: "matchFields the model node's name", place: fields(req("metadata.name", corev1.NodeSelectorOpIn, coverage.ModelNodeName)), reaches: true},
	{name: "matchFields another node", place: fields(req("metadata.name", corev1.NodeSelectorOpIn, "worker-1"))},
	{name: "matchFields NotIn another node", place: fields(req("metadata.name", corev1.NodeSelectorOpNotIn, "worker-1")), reaches: true},
	{name: "matchFields NotIn the model node", place: fields(req("metadata.name", corev1.NodeSelectorOpNotIn, coverage.ModelNodeName))},
	{name: "matchFields on a field nodes lack", place: fields(req("spec.unschedulable", corev1.NodeSelectorOpNotIn, "true")), reaches: true},
	{name: "matchFields with two values", place: fields(req("metadata.name", corev1.NodeSelectorOpNotIn, "a", "b"))},
	{name: "matchFields Exists", place: fields(req("metadata.name", corev1.NodeSelectorOpExists))},
	{name: "nodeName another node", place: func(s *corev1.PodSpec) { s.NodeName = "worker-1" }},
	{name: "nodeName the model node", place: func(s *corev1.PodSpec) { s.NodeName = coverage.ModelNodeName }, reaches: true},
	{name: "nodeName the model node, Windows", place: func(s *corev1.PodSpec) {
		s.NodeName = coverage.ModelNodeName
		s.NodeSelector = map[string]string{corev1.LabelOSStable: "windows"}
	}},
	{name: "an empty term", place: terms(term())},
	{name: "an empty term or a Linux term", place: terms(term(), term(req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"))), reaches: true},
	{name: "no terms", place: terms()},
	{name: "a term with fields and expressions", place: func(s *corev1.PodSpec) {
		terms(term(req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux")))(s)
		t := &s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
		t.MatchFields = []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "worker-1")}
	}},
	// Invalid requirements: the whole term matches nothing.
	{name: "NotIn an invalid label value", place: terms(term(req("dsguard.io/pool", corev1.NodeSelectorOpNotIn, "not a label value")))},
	{name: "NotIn a value too long for a label", place: terms(term(req("dsguard.io/pool", corev1.NodeSelectorOpNotIn, strings.Repeat("a", 64))))},
	{name: "NotIn a value as long as a label may be", place: terms(term(req("dsguard.io/pool", corev1.NodeSelectorOpNotIn, strings.Repeat("a", 63)))), reaches: true},
	{name: "In no values", place: terms(term(req(corev1.LabelOSStable, corev1.NodeSelectorOpIn)))},
	{name: "NotIn no values", place: terms(term(req("dsguard.io/pool", corev1.NodeSelectorOpNotIn)))},
	{name: "DoesNotExist with values", place: terms(term(req("dsguard.io/pool", corev1.NodeSelectorOpDoesNotExist, "x")))},
	{name: "Exists with values", place: terms(term(req(hostname, corev1.NodeSelectorOpExists, "x")))},
	{name: "an unknown operator", place: terms(term(req("dsguard.io/pool", "Equals", "x")))},
	{name: "an invalid term or a Linux term", place: terms(term(req("dsguard.io/pool", corev1.NodeSelectorOpNotIn)), term(req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"))), reaches: true},
	// Too large to judge counts as reaching, whatever the terms say.
	{name: "more terms than judged", place: terms(many(policy.MaxAffinityTerms+1, func(int) []corev1.NodeSelectorRequirement {
		return term(req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "windows"))
	})...), reaches: true},
	{name: "as many terms as judged", place: terms(many(policy.MaxAffinityTerms, func(int) []corev1.NodeSelectorRequirement {
		return term(req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "windows"))
	})...)},
	{name: "more values than judged", place: terms(term(req(corev1.LabelArchStable, corev1.NodeSelectorOpIn,
		many(policy.MaxAffinityValues+1, func(i int) string { return fmt.Sprintf("arch-%d", i) })...))), reaches: true},
	{name: "as many values as judged", place: terms(term(req(corev1.LabelArchStable, corev1.NodeSelectorOpIn,
		many(policy.MaxAffinityValues, func(i int) string { return fmt.Sprintf("arch-%d", i) })...)))},
	// Gt and Lt against the model nodes' label dsguard.io/rack=5.
	{name: "rack Gt 4", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpGt, "4"))), reaches: true},
	{name: "rack Gt 5", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpGt, "5")))},
	{name: "rack Lt 6", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpLt, "6"))), reaches: true},
	{name: "rack Lt 5", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpLt, "5")))},
	{name: "rack Gt 4 with leading zeros", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpGt, "000000000000000000000004"))), reaches: true},
	{name: "rack Lt the largest int64", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpLt, "9223372036854775807"))), reaches: true},
	{name: "rack Lt beyond int64", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpLt, "9223372036854775808")))},
	{name: "rack Lt twenty digits", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpLt, "10000000000000000000")))},
	{name: "rack Lt nineteen digits with leading zeros", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpLt, "01000000000000000000"))), reaches: true},
	{name: "rack Gt a negative number", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpGt, "-1")))},
	{name: "rack Gt no number", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpGt, "abc")))},
	{name: "rack Gt two values", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpGt, "1", "2")))},
	{name: "rack Gt no value", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpGt)))},
	{name: "rack In 5", policy: "numeric", place: selector(rackKey, "5"), reaches: true},
	{name: "rack NotIn 5", policy: "numeric", place: terms(term(req(rackKey, corev1.NodeSelectorOpNotIn, "5")))},
	{name: "no control-plane label on a dedicated taint's nodes", policy: "numeric", place: terms(term(req(cpKey, corev1.NodeSelectorOpExists)))},
}

// TestRender_ControlPlaneTolerationFollowsTheModelNodes requires the
// generated policy and the webhook (without live nodes, so against
// coverage.ModelTaintedNodes) to agree with each case on whether an
// untolerated placement reaches the tainted nodes: denied if it does.
func TestRender_ControlPlaneTolerationFollowsTheModelNodes(t *testing.T) {
	compiledPolicies := map[string][]compiled{}
	webhooks := map[string]*webhook.DaemonSetHandler{}
	for name, doc := range placementPolicies {
		webhooks[name], compiledPolicies[name] = ruleAlone(t, doc, "control-plane-toleration")
	}
	for _, tc := range placementCases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.policy
			if p == "" {
				p = "control-plane"
			}
			ds := &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: "agent"},
				Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "agent", Image: "agent:v1"}}}}},
			}
			tc.place(&ds.Spec.Template.Spec)
			want := "allow"
			if tc.reaches {
				want = "deny"
			}
			r := request{namespace: "fixtures", object: ds}
			if got, msgs := webhookVerdict(t, webhooks[p], r); got != want {
				t.Errorf("webhook: %s %q, want %s", got, msgs, want)
			}
			got, msgs := admit(t, compiledPolicies[p], r)
			if got != want {
				t.Errorf("generated policy: %s %q, want %s", got, msgs, want)
			}
		})
	}
}

// ruleAlone parses a policy document, turns every rule but id off, and
// returns the webhook serving it and the generated policies, compiled.
func ruleAlone(t *testing.T, doc, id string) (*webhook.DaemonSetHandler, []compiled) {
	t.Helper()
	cfg, err := rules.Builtin().ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules.Builtin().Rules() {
		if r.ID != id {
			cfg.Rules.Options(r.ID).Action = policy.ActionOff
		}
	}
	engine, err := policy.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Today: testDay}
	res, err := Render(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return webhookHandler(t, engine, opts), compileResult(t, res)
}
