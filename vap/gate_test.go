package vap

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/dsguard/dsguard/webhook"
)

// gatePolicy lets members of platform-team and sre write exemptions and
// intended coverage; break-glass and oncall bypass everything.
const gatePolicy = `apiVersion: dsguard.io/v1alpha1
kind: PolicyConfig
exemptions: {allowedGroups: [platform-team, sre]}
bypass: {users: [break-glass], groups: [oncall]}
`

// gateOptions: kube-system fails open, "ignored" is never judged.
var gateOptions = Options{Namespace: testOwnNamespace, GranterRole: "dsguard-exemption-granter", ExcludedNamespaces: []string{"ignored"},
	FailOpenNamespaces: []string{"kube-system", "dsguard-system"}, Today: testDay}

// Who asks: an outsider (a tenant), members of each allowed group, and the
// break-glass identities.
var (
	mallory    = requester{"mallory", []string{"tenants", "system:authenticated"}}
	pat        = requester{"pat", []string{"platform-team", "system:authenticated"}}
	sam        = requester{"sam", []string{"sre"}}
	breakGlass = requester{"break-glass", nil}
	onCall     = requester{"olga", []string{"oncall"}}
	gina       = requester{"gina", []string{"system:authenticated"}} // RBAC lets her grant in every namespace
	nina       = requester{"nina", []string{"system:authenticated"}} // in team-a only
	nobody     = requester{"", nil}
)

type requester struct {
	name   string
	groups []string
}

const (
	cptExemption = policy.ExemptionAnnotationPrefix + "control-plane-toleration"
	intendedKey  = policy.IntendedCoverageAnnotation
	// grant holds for 30 days after testDay, within maxExemptionDays.
	grant = "migration OPS-1; expires=2026-07-01"
)

// compliantDaemonSet is node-exporter with a toleration of every taint:
// the default policy denies nothing in it.
func compliantDaemonSet(t testing.TB) *appsv1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile("../examples/node-exporter-tolerations.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	if err := yaml.UnmarshalStrict(data, ds); err != nil {
		t.Fatal(err)
	}
	ds.Namespace = ""
	return ds
}

// renderGated renders a policy document with opts, and returns dsguard's
// DaemonSet handler serving it (with the rules that are not rendered off,
// as the policies leave them to the webhook), every generated policy and
// the gate's alone, compiled.
func renderGated(t testing.TB, doc string, opts Options) (h *webhook.DaemonSetHandler, all, gate []compiled) {
	t.Helper()
	cfg, err := rules.Builtin().ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules.Builtin().Rules() {
		if !Renders(r.ID) {
			cfg.Rules.Options(r.ID).Action = policy.ActionOff
		}
	}
	engine, err := policy.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Render(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	all = compileResult(t, res)
	for _, c := range all {
		if c.policy.Labels[RuleLabel] == GateName {
			gate = append(gate, c)
		}
	}
	return webhookHandler(t, engine, opts), all, gate
}

// gateRefusal is the webhook's refusal by the exemption gate
// (policy.GateRefusal), "" when its answer is another: the gate refuses
// before any rule is judged, with a message of its own.
func gateRefusal(verdict string, messages []string) string {
	if verdict == "deny" && strings.HasPrefix(messages[0], "dsguard refuses the change to ") {
		return messages[0]
	}
	return ""
}

// judged reports whether the webhook is asked about a DaemonSet in ns: the
// webhook configuration's namespaceSelector leaves the excluded namespaces
// out (the handler itself leaves out only its own).
func judged(opts Options, ns string) bool { return !slices.Contains(opts.ExcludedNamespaces, ns) }

// oneLine is the webhook's refusal as a policy must say it: a message with
// a line break is refused by the API server.
func oneLine(webhookMessage string) string {
	return strings.Replace(webhookMessage, ".\n  fix: ", "; fix: ", 1)
}

// TestRender_ExemptionGate replays the two-step self-exemption and the
// gate's edges through the generated policies, evaluated as the API server
// evaluates them, and requires the webhook's verdict and message for each:
// under the policy as written, and under enforcement: warn, which must not
// lower the gate.
func TestRender_ExemptionGate(t *testing.T) {
	withAnnotations := func(kv ...string) *appsv1.DaemonSet {
		ds := compliantDaemonSet(t)
		if len(kv) > 0 {
			ds.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			ds.Annotations[kv[i]] = kv[i+1]
		}
		return ds
	}
	untolerated := func(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
		ds.Spec.Template.Spec.Tolerations = nil
		return ds
	}
	type rendered struct {
		name      string
		webhook   *webhook.DaemonSetHandler
		all, gate []compiled
	}
	var docs []rendered
	for _, doc := range []struct{ name, text string }{
		{"as written", gatePolicy},
		{"enforcement: warn", gatePolicy + "enforcement: warn\n"},
		{"namespaceEnforcement: audit", gatePolicy + "namespaceEnforcement: [{namespaces: [\"*\"], enforcement: audit}]\n"},
	} {
		h, all, gate := renderGated(t, doc.text, gateOptions)
		docs = append(docs, rendered{doc.name, h, all, gate})
	}
	many := []string{}
	for i := range gateMessageKeys + 8 {
		many = append(many, fmt.Sprintf("%sr%02d", policy.ExemptionAnnotationPrefix, i), "why")
	}
	for _, tc := range []struct {
		name string
		ns   string // team-a when empty
		who  requester
		old  *appsv1.DaemonSet // nil: CREATE
		new  *appsv1.DaemonSet
		// status: the write goes through daemonsets/status.
		status bool
		// gate is the gate's verdict; denies, under the policy as written,
		// whether all the generated policies deny.
		gate    string
		denies  bool
		message string // in the gate's message
	}{
		{name: "CREATE with an exemption by an outsider", who: mallory, new: withAnnotations(cptExemption, grant),
			gate: "deny", denies: true, message: "dsguard refuses the change to annotation " + cptExemption + ": only cluster admins and whoever RBAC " +
				"allows to create exemptions.dsguard.io named \"team-a\" in namespace dsguard-system (a RoleBinding there to ClusterRole " +
				"dsguard-exemption-granter) and members of platform-team, sre may"},
		{name: "CREATE with an exemption by a member", who: pat, new: withAnnotations(cptExemption, grant), gate: "allow"},
		{name: "CREATE with an exemption by a member of the second group", who: sam, new: withAnnotations(cptExemption, grant), gate: "allow"},
		{name: "CREATE with intended coverage by an outsider", who: mallory, new: withAnnotations(intendedKey, "GPU nodes only"),
			gate: "deny", denies: true, message: "annotation " + intendedKey},
		{name: "CREATE with another annotation by an outsider", who: mallory, new: withAnnotations("example.com/owner", "team-a"), gate: "allow"},
		{name: "CREATE with an exemption by someone without a name or groups", who: nobody, new: withAnnotations(cptExemption, grant),
			gate: "deny", denies: true, message: "and  is not one"},
		{name: "step 1: an outsider adds an exemption to a compliant DaemonSet", who: mallory, old: withAnnotations(),
			new: withAnnotations(cptExemption, grant), gate: "deny", denies: true, message: "and mallory is not one of them; fix: ask one of them to apply it"},
		{name: "step 1 by a member", who: pat, old: withAnnotations(), new: withAnnotations(cptExemption, grant), gate: "allow"},
		{name: "step 2: an outsider drops the tolerations, leaving the granted exemption", who: mallory,
			old: withAnnotations(cptExemption, grant), new: untolerated(withAnnotations(cptExemption, grant)), gate: "allow"},
		{name: "without the exemption, dropping the tolerations is denied by the rule", who: mallory,
			old: withAnnotations(), new: untolerated(withAnnotations()), gate: "allow", denies: true},
		{name: "step 1 and 2 in one request by an outsider", who: mallory, old: withAnnotations(),
			new: untolerated(withAnnotations(cptExemption, grant)), gate: "deny", denies: true},
		{name: "an outsider renews an exemption", who: mallory, old: withAnnotations(cptExemption, grant),
			new: withAnnotations(cptExemption, "migration OPS-1; expires=2026-08-01"), gate: "deny", denies: true, message: "annotation " + cptExemption},
		{name: "a member renews it", who: sam, old: withAnnotations(cptExemption, grant),
			new: withAnnotations(cptExemption, "migration OPS-1; expires=2026-08-01"), gate: "allow"},
		{name: "an outsider removes an exemption", who: mallory, old: withAnnotations(cptExemption, grant), new: withAnnotations(), gate: "allow"},
		{name: "an outsider changes intended coverage", who: mallory, old: withAnnotations(intendedKey, "GPU nodes only"),
			new: withAnnotations(intendedKey, "every node"), gate: "deny", denies: true, message: "annotation " + intendedKey},
		{name: "an outsider leaves intended coverage and changes the spec", who: mallory, old: withAnnotations(intendedKey, "GPU nodes only"),
			new: untolerated(withAnnotations(intendedKey, "GPU nodes only")), gate: "allow", denies: true},
		{name: "an exemption naming no rule is gated too", who: mallory, old: withAnnotations(),
			new: withAnnotations(policy.ExemptionAnnotationPrefix+"no-such-rule", grant), gate: "deny", denies: true},
		{name: "two annotations at once, named in order", who: mallory, old: withAnnotations("example.com/owner", "a"),
			new: withAnnotations(cptExemption, grant, intendedKey, "GPU nodes only", "example.com/owner", "b"), gate: "deny", denies: true,
			message: "annotations " + intendedKey + ", " + cptExemption + ": only"},
		{name: "more annotations than the message sorts", who: mallory, new: withAnnotations(many...), gate: "deny", denies: true,
			message: fmt.Sprintf("annotations %sr00 and %d more: only", policy.ExemptionAnnotationPrefix, gateMessageKeys+7)},
		{name: "the break-glass user", who: breakGlass, old: withAnnotations(), new: untolerated(withAnnotations(cptExemption, grant)), gate: "allow"},
		{name: "a break-glass group", who: onCall, new: withAnnotations(cptExemption, grant), gate: "allow"},
		{name: "a fail-open namespace only warns", ns: "kube-system", who: mallory, old: withAnnotations(), new: withAnnotations(cptExemption, grant),
			gate: "warn", message: "dsguard would refuse the change to annotation " + cptExemption + ": only cluster admins and whoever RBAC allows to " +
				"create exemptions.dsguard.io named \"kube-system\" in namespace dsguard-system (a RoleBinding there to ClusterRole " +
				"dsguard-exemption-granter) and members of platform-team, sre may add or change exemption and intended-coverage annotations " +
				"(exemptions.grantedByRBAC, exemptions.allowedGroups), and mallory is not one of them; admitted: namespace kube-system fails open, " +
				"where dsguard only warns; fix: ask one of them"},
		{name: "RBAC lets gina grant everywhere", who: gina, old: withAnnotations(), new: withAnnotations(cptExemption, grant), gate: "allow"},
		{name: "RBAC lets nina grant in team-a", who: nina, old: withAnnotations(), new: withAnnotations(cptExemption, grant), gate: "allow"},
		{name: "but not in team-b", ns: "team-b", who: nina, old: withAnnotations(), new: withAnnotations(cptExemption, grant),
			gate: "deny", denies: true, message: "named \"team-b\" in namespace dsguard-system"},
		{name: "through daemonsets/status a member is refused", status: true, who: pat, old: withAnnotations(), new: withAnnotations(cptExemption, grant),
			gate: "deny", denies: true, message: "dsguard refuses the change to annotation " + cptExemption + " through the status subresource: " +
				"exemption and intended-coverage annotations are written by an update of the DaemonSet itself"},
		{name: "through daemonsets/status RBAC grants nobody", status: true, who: gina, old: withAnnotations(intendedKey, "GPU nodes only"),
			new: withAnnotations(intendedKey, "every node"), gate: "deny", denies: true, message: "fix: have someone who may grant exemptions run kubectl annotate daemonset node-exporter"},
		{name: "through daemonsets/status another annotation passes", status: true, who: mallory, old: withAnnotations(),
			new: withAnnotations("example.com/owner", "b"), gate: "allow"},
		{name: "through daemonsets/status a removal passes", status: true, who: mallory, old: withAnnotations(cptExemption, grant),
			new: withAnnotations(), gate: "allow"},
		{name: "through daemonsets/status in a fail-open namespace only warns", ns: "kube-system", status: true, who: gina, old: withAnnotations(),
			new: withAnnotations(cptExemption, grant), gate: "warn", message: "through the status subresource"},
		{name: "dsguard's own namespace is never judged", ns: "dsguard-system", who: mallory, new: withAnnotations(cptExemption, grant), gate: "allow"},
		{name: "an excluded namespace is never judged", ns: "ignored", who: mallory, new: withAnnotations(cptExemption, grant), gate: "allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = "team-a"
			}
			r := request{namespace: ns, object: tc.new, old: tc.old, user: tc.who.name, groups: tc.who.groups}
			if tc.status {
				r.subresource = "status"
			}
			for _, doc := range docs {
				got, msgs := admit(t, doc.gate, r)
				if got != tc.gate {
					t.Errorf("%s: the generated gate gives %s %q, the case says %s", doc.name, got, msgs, tc.gate)
					continue
				}
				if judged(gateOptions, ns) {
					answer, answerMsgs := webhookVerdict(t, doc.webhook, r)
					full, fullMsgs := admit(t, doc.all, r)
					if full != answer {
						t.Errorf("%s: the generated policies give %s %q, the webhook %s %q", doc.name, full, fullMsgs, answer, answerMsgs)
					}
					refusal := gateRefusal(answer, answerMsgs)
					if (refusal != "") != (tc.gate == "deny") {
						t.Errorf("%s: the webhook answers %s %q, the generated gate %s", doc.name, answer, answerMsgs, got)
					}
					if refusal != "" && !strings.Contains(msgs[0], " more: only") && msgs[0] != oneLine(refusal) {
						t.Errorf("%s: the message differs from the webhook's:\n got %s\nwant %s", doc.name, msgs[0], oneLine(refusal))
					}
				}
				if got == "allow" {
					continue
				}
				if len(msgs) != 1 {
					t.Fatalf("%s: want one message, got %q", doc.name, msgs)
				}
				if !strings.Contains(msgs[0], tc.message) {
					t.Errorf("%s: the message lacks %q:\n%s", doc.name, tc.message, msgs[0])
				}
				if doc.name == "as written" {
					if full, fullMsgs := admit(t, doc.all, r); (full == "deny") != tc.denies {
						t.Errorf("all the generated policies give %s %q; want a deny: %v", full, fullMsgs, tc.denies)
					}
				}
			}
		})
	}
}

// TestRender_ExemptionGateAgreesWithTheWebhook sweeps every rule fixture
// and generated DaemonSets (whose annotations include exemptions and
// intended coverage, valid or not), created and updated five ways by an
// outsider, a member, two whom RBAC lets grant (everywhere, in team-a only)
// and the break-glass user, also through daemonsets/status, in an ordinary and a
// fail-open namespace, and requires of the generated policies dsguard's own
// DaemonSet handler's verdict; where its gate refuses, the gate's policy
// refuses with its message, and where it would refuse but the namespace
// fails open (it asks the same handler about an ordinary namespace), the
// gate's policy warns.
func TestRender_ExemptionGateAgreesWithTheWebhook(t *testing.T) {
	h, all, gate := renderGated(t, gatePolicy, gateOptions)
	closed := gateOptions
	closed.FailOpenNamespaces = nil
	failsClosed, _, _ := renderGated(t, gatePolicy, closed)
	changes := map[string]func(*appsv1.DaemonSet){
		"exemption added":   func(ds *appsv1.DaemonSet) { setKey(&ds.Annotations, cptExemption, grant) },
		"intended added":    func(ds *appsv1.DaemonSet) { setKey(&ds.Annotations, intendedKey, "GPU nodes only") },
		"template changed":  func(ds *appsv1.DaemonSet) { setKey(&ds.Spec.Template.Annotations, "dsguard.io/revision", "2") },
		"annotations moved": func(ds *appsv1.DaemonSet) { moveGated(ds) },
		"annotations dropped": func(ds *appsv1.DaemonSet) {
			maps := ds.Annotations
			for k := range maps {
				if policy.GatedAnnotation(k) {
					delete(maps, k)
				}
			}
		},
	}
	counts := map[string]int{}
	for _, s := range subjects(t, 40) {
		for _, who := range []requester{mallory, pat, gina, nina, breakGlass} {
			check := func(what string, r request) {
				t.Helper()
				answer, answerMsgs := webhookVerdict(t, h, r)
				got, msgs := admit(t, all, r)
				counts[answer]++
				if got != answer {
					t.Errorf("%s: the generated policies give %s %q, the webhook %s %q", what, got, msgs, answer, answerMsgs)
				}
				// Where the namespace fails open the webhook refuses nothing:
				// the same request to a webhook for which it does not says
				// what it would refuse, which the gate warns about there.
				failsOpen := slices.Contains(gateOptions.FailOpenNamespaces, r.namespace)
				refused := gateRefusal(answer, answerMsgs)
				if failsOpen {
					refused = gateRefusal(webhookVerdict(t, failsClosed, r))
				}
				gateGot, gateMsgs := admit(t, gate, r)
				want := "allow"
				switch {
				case refused != "" && failsOpen:
					want = "warn"
					counts["gate warning"]++
				case refused != "":
					want = "deny"
					counts["gate refusal"]++
				}
				switch {
				case gateGot != want:
					t.Errorf("%s: the generated gate gives %s %q, want %s (the webhook's refusal: %q)", what, gateGot, gateMsgs, want, refused)
				case want == "deny" && !strings.Contains(gateMsgs[0], " more: only") && gateMsgs[0] != oneLine(refused):
					t.Errorf("%s: the message differs from the webhook's:\n got %s\nwant %s", what, gateMsgs[0], oneLine(refused))
				}
			}
			for _, ns := range []string{"team-a", "kube-system"} {
				r := request{namespace: ns, object: s.ds, user: who.name, groups: who.groups}
				check(fmt.Sprintf("create %s/%s by %s", ns, s.name, who.name), r)
				for _, how := range slices.Sorted(mapsKeys(changes)) {
					changed := s.ds.DeepCopy()
					changes[how](changed)
					r.object, r.old = changed, s.ds
					check(fmt.Sprintf("update %s/%s by %s: %s", ns, s.name, who.name, how), r)
					// Through daemonsets/status the API server keeps the old
					// spec and stores the new metadata.
					status := r
					status.subresource, status.object = "status", s.ds.DeepCopy()
					status.object.Annotations = changed.Annotations
					check(fmt.Sprintf("status update %s/%s by %s: %s", ns, s.name, who.name, how), status)
				}
			}
		}
	}
	t.Logf("verdicts compared: %d deny, %d warn, %d allow; %d gate refusals, %d gate warnings", counts["deny"], counts["warn"],
		counts["allow"], counts["gate refusal"], counts["gate warning"])
	for _, kind := range []string{"deny", "warn", "allow", "gate refusal", "gate warning"} {
		if counts[kind] < 50 {
			t.Errorf("only %d %s verdicts: the subjects must exercise every outcome", counts[kind], kind)
		}
	}
}

// moveGated gives every gated annotation another value, and adds one when
// there is none.
func moveGated(ds *appsv1.DaemonSet) {
	moved := false
	for k, v := range ds.Annotations {
		if policy.GatedAnnotation(k) {
			ds.Annotations[k] = v + " (changed)"
			moved = true
		}
	}
	if !moved {
		setKey(&ds.Annotations, policy.ExemptionAnnotationPrefix+"privileged", "moved")
	}
}

// TestRender_ExemptionGateOnlyWhereTheWebhooksApplies: no gate without
// exemptions.allowedGroups; no warn policy without fail-open namespaces;
// the gate's policies compile with the oldest CEL the vap modes support,
// carry the gate's label and names, and are never lowered by enforcement.
func TestRender_ExemptionGateOnlyWhereTheWebhooksApplies(t *testing.T) {
	gateNames := func(t *testing.T, doc string, opts Options) []string {
		t.Helper()
		cfg, err := rules.Builtin().ParseConfig([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Render(cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		compileAll(t, res)
		var names []string
		for i, p := range res.Policies {
			if p.Labels[RuleLabel] != GateName {
				continue
			}
			names = append(names, p.Name+"="+string(res.Bindings[i].Spec.ValidationActions[0]))
			if p.Annotations[NotExpressedAnnotation] == "" {
				t.Errorf("%s has no %s annotation", p.Name, NotExpressedAnnotation)
			}
		}
		return names
	}
	const plain = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"
	for _, tc := range []struct {
		name, doc string
		opts      Options
		want      []string
	}{
		{"neither RBAC nor allowedGroups", plain + "exemptions: {grantedByRBAC: false}\n", gateOptions, nil},
		{"allowedNamespaces alone", plain + "exemptions: {grantedByRBAC: false, allowedNamespaces: [team-b]}\n", gateOptions, nil},
		{"the default: RBAC", plain, gateOptions, []string{"dsguard-exemption-gate-deny=Deny", "dsguard-exemption-gate-warn=Warn"}},
		{"allowedGroups", gatePolicy, gateOptions, []string{"dsguard-exemption-gate-deny=Deny", "dsguard-exemption-gate-warn=Warn"}},
		{"allowedGroups, enforcement: audit", gatePolicy + "enforcement: audit\n", gateOptions,
			[]string{"dsguard-exemption-gate-deny=Deny", "dsguard-exemption-gate-warn=Warn"}},
		{"no fail-open namespaces", gatePolicy, Options{Namespace: "dsguard-system", Today: testDay}, []string{"dsguard-exemption-gate-deny=Deny"}},
		{"every fail-open namespace excluded", gatePolicy, Options{Namespace: "kube-system", FailOpenNamespaces: []string{"kube-system"}, Today: testDay},
			[]string{"dsguard-exemption-gate-deny=Deny"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gateNames(t, tc.doc, tc.opts); !slices.Equal(got, tc.want) {
				t.Errorf("gate policies %v, want %v", got, tc.want)
			}
		})
	}
}
