package clusterview

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dsguard/dsguard/policy"
)

func TestPolicyLoader_Apply(t *testing.T) {
	ref := PolicyRef{Namespace: "dsguard-system", Name: "dsguard-policy", Key: "policy.yaml"}
	cm := func(rv string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "dsguard-system", Name: ref.Name, ResourceVersion: rv}, Data: data}
	}
	src := NewPolicySource(NewPolicyMetrics(prometheus.NewRegistry()))
	rec := events.NewFakeRecorder(10)
	l := &PolicyLoader{Ref: ref, Source: src, Recorder: rec, Log: logr.Discard()}
	event := func() string {
		select {
		case e := <-rec.Events:
			return e
		default:
			return ""
		}
	}

	// A broken ConfigMap at start-up: defaults are served, degraded, Event.
	l.apply(cm("1", map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcment: warn\n"}))
	if a := src.Current(); a == nil || !strings.HasPrefix(a.Origin, "built-in defaults") || src.Degraded() == nil {
		t.Fatalf("after an invalid first policy: active %+v, degraded %v", a, src.Degraded())
	}
	// No last good policy to fall back on: the defaults, said out loud.
	if e := event(); !strings.Contains(e, "Warning DefaultPolicy") || !strings.Contains(e, "no last good policy is recorded") {
		t.Errorf("event = %q", e)
	}
	if e := event(); !strings.Contains(e, "Warning InvalidPolicy") || !strings.Contains(e, `line 3: unknown field "enforcment"`) {
		t.Errorf("event = %q", e)
	}

	// A good one replaces it.
	l.apply(cm("2", map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: warn\n"}))
	good := src.Current()
	if src.Degraded() != nil || good.Policy.Enforcement() != "warn" {
		t.Fatalf("good policy not active: %+v degraded=%v", good, src.Degraded())
	}
	if e := event(); !strings.Contains(e, "Normal PolicyLoaded") {
		t.Errorf("event = %q", e)
	}
	// enforcement: warn is weaker than the baseline: said out loud.
	if e := event(); !strings.Contains(e, "Warning WeakPolicy") || !strings.Contains(e, "enforcement is warn") {
		t.Errorf("event = %q", e)
	}

	// A ConfigMap without the key keeps the good one.
	l.apply(cm("3", map[string]string{"other": "x"}))
	if src.Current() != good || src.Degraded() == nil {
		t.Error("a ConfigMap without the key must keep the last good policy and mark the source degraded")
	}
	if e := event(); !strings.Contains(e, `key "policy.yaml" is missing`) {
		t.Errorf("event = %q", e)
	}

	// Other ConfigMaps are ignored; a tombstone of the policy is understood.
	other := cm("4", nil)
	other.Name = "unrelated"
	l.apply(other)
	if src.Current() != good {
		t.Error("an unrelated ConfigMap changed the policy")
	}
	if asConfigMap(cache.DeletedFinalStateUnknown{Obj: cm("5", nil)}) == nil {
		t.Error("tombstones must be unwrapped")
	}
}

// TestPolicyLoader_Integrity: the last good policy is recorded in its own
// ConfigMap and served by a replica that starts on a broken or missing
// policy ConfigMap; a forged annotation or a record that does not match its
// digest is never served; a deleted ConfigMap leaves the last good policy
// in force; a weak policy is counted.
func TestPolicyLoader_Integrity(t *testing.T) {
	ref := PolicyRef{Namespace: "dsguard-system", Name: "dsguard-policy", Key: "policy.yaml"}
	const strict = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  readiness-probe: {action: deny}\n"
	const broken = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: sometimes\n"
	stored := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, ResourceVersion: "7"},
		Data: map[string]string{ref.Key: strict}}
	c := fake.NewClientBuilder().WithObjects(stored.DeepCopy()).Build()
	store := &LastGoodStore{Client: c, Reader: c, Namespace: ref.Namespace, Name: ref.Name + LastGoodSuffix}

	// Replica A loads the policy and records it.
	a := &PolicyLoader{Ref: ref, Source: NewPolicySource(nil), Log: logr.Discard(), LastGood: store}
	var cur corev1.ConfigMap
	if err := c.Get(t.Context(), ref.NamespacedName(), &cur); err != nil {
		t.Fatal(err)
	}
	a.apply(&cur)
	if doc, _, err := store.Load(t.Context()); err != nil || string(doc) != strict {
		t.Fatalf("the last good policy was not recorded: %q, %v", doc, err)
	}

	// Someone breaks the ConfigMap, with a forged "last good" annotation
	// of the kind older versions read; replica B starts now.
	cur.Data[ref.Key] = broken
	cur.Annotations = map[string]string{"dsguard.io/last-good-policy": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: audit\n"}
	m := NewPolicyMetrics(prometheus.NewRegistry())
	rec := events.NewFakeRecorder(10)
	b := &PolicyLoader{Ref: ref, Source: NewPolicySource(m), Log: logr.Discard(), LastGood: store, Recorder: rec}
	b.apply(&cur)
	active := b.Source.Current()
	if active == nil || !strings.Contains(active.Origin, "last good policy") || b.Source.Degraded() == nil {
		t.Fatalf("replica B: active %+v degraded %v; want the recorded policy, degraded", active, b.Source.Degraded())
	}
	if act, _ := active.Policy.RuleAction("readiness-probe"); act != "deny" || active.Policy.Enforcement() != policy.EnforcementEnforce {
		t.Errorf("replica B serves readiness-probe %q, enforcement %q; want the recorded deny, not the forged annotation", act, active.Policy.Enforcement())
	}
	if v := testutil.ToFloat64(m.PolicyDegraded); v != 1 {
		t.Errorf("dsguard_policy_degraded = %v, want 1", v)
	}
	if e := <-rec.Events; !strings.Contains(e, "Warning LastGoodPolicy") {
		t.Errorf("event = %q, want a LastGoodPolicy warning", e)
	}

	// The ConfigMap is deleted: the last good policy stays, degraded.
	a.deleted(&cur)
	if got, _ := a.Source.Current().Policy.RuleAction("readiness-probe"); got != "deny" || a.Source.Degraded() == nil {
		t.Errorf("after deletion: readiness-probe %q degraded %v; want the last good policy kept and degraded", got, a.Source.Degraded())
	}

	// Replica C starts with no ConfigMap at all: the last good policy.
	cSrc := NewPolicySource(nil)
	(&PolicyLoader{Ref: ref, Source: cSrc, Log: logr.Discard(), LastGood: store}).fallBack(t.Context(), errors.New("gone"), nil)
	if got, _ := cSrc.Current().Policy.RuleAction("readiness-probe"); got != "deny" || cSrc.Degraded() == nil {
		t.Errorf("a start without the ConfigMap: readiness-probe %q degraded %v; want the last good policy, degraded", got, cSrc.Degraded())
	}

	// A record changed by hand (its digest no longer matches) is refused:
	// the defaults, loudly.
	var record corev1.ConfigMap
	if err := c.Get(t.Context(), store.key(), &record); err != nil {
		t.Fatal(err)
	}
	record.Data[LastGoodDocumentKey] = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: audit\n"
	if err := c.Update(t.Context(), &record); err != nil {
		t.Fatal(err)
	}
	dSrc := NewPolicySource(nil)
	(&PolicyLoader{Ref: ref, Source: dSrc, Log: logr.Discard(), LastGood: store}).fallBack(t.Context(), errors.New("gone"), nil)
	if a := dSrc.Current(); !strings.HasPrefix(a.Origin, "built-in defaults") || a.Policy.Enforcement() != policy.EnforcementEnforce ||
		dSrc.Degraded() == nil || !strings.Contains(dSrc.Degraded().Error(), "does not match its sha256") {
		t.Errorf("a tampered record: active %q (enforcement %s), degraded %v; want the defaults, degraded, saying why",
			a.Origin, a.Policy.Enforcement(), dSrc.Degraded())
	}
	// An edit that keeps the record's length (deny lowered to warn in
	// place, "deny" and "warn" both four bytes) is refused the same way:
	// the digest is of the content, not its size.
	sameLength := strings.Replace(strict, "deny", "warn", 1)
	record.Data[LastGoodDocumentKey] = sameLength
	record.Data[LastGoodDigestKey] = Digest([]byte(strict))
	if err := c.Update(t.Context(), &record); err != nil {
		t.Fatal(err)
	}
	lSrc := NewPolicySource(nil)
	(&PolicyLoader{Ref: ref, Source: lSrc, Log: logr.Discard(), LastGood: store}).fallBack(t.Context(), errors.New("gone"), nil)
	if lSrc.Degraded() == nil || !strings.Contains(lSrc.Degraded().Error(), "does not match its sha256") {
		t.Errorf("a record edited in place (same length): degraded %v; want refused for its sha256", lSrc.Degraded())
	}
	// With a matching digest, a record that does not validate is refused
	// too.
	record.Data[LastGoodDocumentKey] = broken
	record.Data[LastGoodDigestKey] = Digest([]byte(broken))
	if err := c.Update(t.Context(), &record); err != nil {
		t.Fatal(err)
	}
	eSrc := NewPolicySource(nil)
	(&PolicyLoader{Ref: ref, Source: eSrc, Log: logr.Discard(), LastGood: store}).fallBack(t.Context(), errors.New("gone"), nil)
	if a := eSrc.Current(); !strings.HasPrefix(a.Origin, "built-in defaults") || eSrc.Degraded() == nil {
		t.Errorf("an invalid record: active %q, degraded %v; want the defaults, degraded", a.Origin, eSrc.Degraded())
	}

	// No record at all (a first install without a ConfigMap): the
	// defaults, degraded, never silently.
	empty := fake.NewClientBuilder().Build()
	fSrc := NewPolicySource(nil)
	(&PolicyLoader{Ref: ref, Source: fSrc, Log: logr.Discard(),
		LastGood: &LastGoodStore{Client: empty, Reader: empty, Namespace: ref.Namespace, Name: store.Name}}).fallBack(t.Context(), errors.New("gone"), nil)
	if a := fSrc.Current(); !strings.HasPrefix(a.Origin, "built-in defaults") || fSrc.Degraded() == nil {
		t.Errorf("no record: active %q, degraded %v; want the defaults, degraded", a.Origin, fSrc.Degraded())
	}

	// A weak policy sets its gauge; a strict one clears it.
	b.Source.Load([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nbypass: {groups: [system:authenticated]}\n"), "weak")
	if v := testutil.ToFloat64(m.PolicyWeakened.WithLabelValues("bypass-broad-group")); v != 1 {
		t.Errorf("dsguard_policy_weakened{reason=bypass-broad-group} = %v, want 1", v)
	}
	b.Source.Load([]byte(strict), "strict")
	if v := testutil.ToFloat64(m.PolicyWeakened.WithLabelValues("bypass-broad-group")); v != 0 {
		t.Errorf("after a strict policy: dsguard_policy_weakened{reason=bypass-broad-group} = %v, want 0", v)
	}
}

// TestPolicyLoader_LastGoodIsAdjusted: the recorded policy a replica starts
// on passes through Adjust like any other document, so in vap+webhook mode
// the webhook does not take back the rules the API server enforces.
func TestPolicyLoader_LastGoodIsAdjusted(t *testing.T) {
	ref := PolicyRef{Namespace: "dsguard-system", Name: "dsguard-policy", Key: "policy.yaml"}
	const strict = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  readiness-probe: {action: deny}\n"
	c := fake.NewClientBuilder().Build()
	store := &LastGoodStore{Client: c, Reader: c, Namespace: ref.Namespace, Name: ref.Name + LastGoodSuffix}
	if err := store.Save(t.Context(), []byte(strict)); err != nil {
		t.Fatal(err)
	}
	broken := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, ResourceVersion: "8"},
		Data:       map[string]string{ref.Key: "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: sometimes\n"},
	}
	src := NewPolicySource(nil)
	src.Adjust = func(cfg *policy.Config) { cfg.Rules.Options("readiness-probe").Action = policy.ActionOff }
	l := &PolicyLoader{Ref: ref, Source: src, Log: logr.Discard(), LastGood: store}
	l.apply(broken)
	active := src.Current()
	if active == nil || !strings.Contains(active.Origin, "last good policy") {
		t.Fatalf("active %+v; want the recorded policy", active)
	}
	if act, _ := active.Policy.RuleAction("readiness-probe"); act != policy.ActionOff {
		t.Errorf("readiness-probe = %q from the recorded policy, want %q as Adjust sets it", act, policy.ActionOff)
	}
}

func TestPolicyLoader_PolicyWeakened(t *testing.T) {
	ref := PolicyRef{Namespace: "dsguard-system", Name: "dsguard-policy", Key: "policy.yaml"}
	m := NewPolicyMetrics(prometheus.NewRegistry())
	src := NewPolicySource(m)
	rec := events.NewFakeRecorder(10)
	l := &PolicyLoader{Ref: ref, Source: src, Recorder: rec, Log: logr.Discard()}
	load := func(rv, doc string) []string {
		t.Helper()
		l.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, ResourceVersion: rv},
			Data: map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n" + doc}})
		var weakened []string
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, "PolicyWeakened") {
				weakened = append(weakened, e)
			}
		}
		return weakened
	}
	count := func(reason string) float64 { return testutil.ToFloat64(m.PolicyWeakenings.WithLabelValues(reason)) }

	// The first policy has nothing before it to weaken.
	if e := load("1", "bypass: {users: [alice]}\n"); len(e) != 0 {
		t.Errorf("first load: PolicyWeakened %q, want none", e)
	}
	// A deny rule turned to warn, and a bypass user added.
	e := load("2", "bypass: {users: [alice, bob]}\nrules:\n  surge-host-port: {action: warn}\n")
	if len(e) != 1 || !strings.HasPrefix(e[0], "Warning PolicyWeakened") ||
		!strings.Contains(e[0], "policy generation 2 lowers enforcement against the one before: bypass.users adds bob") ||
		!strings.Contains(e[0], "; rules.surge-host-port.action deny → warn") {
		t.Errorf("a weakening load: PolicyWeakened %q, want one naming both changes", e)
	}
	if c, b := count("deny-rule-lowered"), count(policy.WeakeningBypassAdded); c != 1 || b != 1 {
		t.Errorf("dsguard_policy_weakenings_total deny-rule-lowered %v, bypass-added %v; want 1 each", c, b)
	}
	// Strengthening it again, or changing only metadata, lowers nothing.
	if e := load("3", "bypass: {users: [alice]}\n"); len(e) != 0 {
		t.Errorf("a strengthening load: PolicyWeakened %q, want none", e)
	}
	if e := load("4", "bypass: {users: [alice]}\n"); len(e) != 0 {
		t.Errorf("the same policy again: PolicyWeakened %q, want none", e)
	}
	if c := count("deny-rule-lowered"); c != 1 {
		t.Errorf("dsguard_policy_weakenings_total deny-rule-lowered %v after loads that lower nothing, want 1", c)
	}
}
