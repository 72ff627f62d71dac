package vap

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dsguard/dsguard/policy/rules"
)

// verdict is what a DaemonSet write got from dsguard: deny, warn or allow,
// and which rules answered.
type verdict struct {
	kind string // "deny", "warn", "allow"
	text string // the deny message or the warnings, for failure output
	// rules are the IDs of the rules that denied (for a deny) or warned
	// (for a warn), sorted.
	rules []string
	// update: the verdict is on an UPDATE.
	update bool
}

func (v verdict) String() string { return v.kind + " " + strings.Join(v.rules, ",") + ": " + v.text }

// webhookRule finds the rule IDs of the webhook's deny message ("[rule]
// field: ...") and of its warnings ("rule: ..."); policyRule the rule of a
// generated policy's answer, named dsguard-<rule>-<action>.
var (
	webhookDenyRule = regexp.MustCompile(`\[([a-z0-9-]+)\] `)
	policyRule      = regexp.MustCompile(`ValidatingAdmissionPolicy 'dsguard-([a-z0-9-]+?)-(?:deny-ratcheted|deny-warn|deny|warn)'`)
)

// rulesOf returns the sorted, distinct rule IDs that answered in text
// (a deny message or one warning).
func rulesOf(text string) []string {
	var out []string
	if m := policyRule.FindAllStringSubmatch(text, -1); m != nil {
		for _, g := range m {
			out = append(out, g[1])
		}
	} else {
		for _, g := range webhookDenyRule.FindAllStringSubmatch(text, -1) {
			out = append(out, g[1])
		}
		for _, r := range rules.Builtin().Rules() {
			if strings.HasPrefix(text, r.ID+": ") {
				out = append(out, r.ID)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// agrees reports whether the generated policies' verdict got gives the
// webhook's want: the same outcome, the same rules warning, and for a deny
// one of the webhook's denying rules (the API server names one denying
// policy of several, the first it ran); and every answer of a generated
// policy speaks for its own rule, at a field the webhook's deny names for
// that rule where both give one (see messagesAgree).
func agrees(want, got verdict) bool {
	if want.kind != got.kind || !messagesAgree(want, got) {
		return false
	}
	switch want.kind {
	case "warn":
		if strings.Contains(want.text, "more warnings not shown") {
			// The webhook names only its first warnings.
			return !slices.ContainsFunc(want.rules, func(r string) bool { return !slices.Contains(got.rules, r) })
		}
		return slices.Equal(want.rules, got.rules)
	case "deny":
		return len(got.rules) == 1 && slices.Contains(want.rules, got.rules[0])
	}
	return true
}

// The generated policies' answers as the API server words them (its
// validating admission policy dispatcher), and the rule ID and field a
// rule's message starts with ("[rule] field: ..."), in theirs and in the
// webhook's deny message alike.
var (
	policyDeny    = regexp.MustCompile(`(?s)ValidatingAdmissionPolicy 'dsguard-([a-z0-9-]+?)-(?:deny-ratcheted|deny-warn|deny|warn)' with binding '[^']*' denied request: (.*)`)
	policyWarning = regexp.MustCompile(`(?s)ValidatingAdmissionPolicy 'dsguard-([a-z0-9-]+?)-(?:deny-ratcheted|deny-warn|deny|warn)' with binding '[^']*': (.*)`)
	messageRule   = regexp.MustCompile(`^\[([a-z0-9-]+)\] ([^:\s]*): `)
	webhookDenied = regexp.MustCompile(`(?m)^\[([a-z0-9-]+)\] ([^:\s]*): `)
)

// messagesAgree reports whether every answer of a generated policy in got
// whose message names a rule ("[rule] field: ...", which every rule's
// message does; the exemption gate's do not) names the rule the policy is
// for, and, for a deny on CREATE, a field the webhook's deny message names
// for that rule. On an UPDATE a policy's message names the first offending
// item, which may be one the webhook ratchets (it then denies for an item
// the update adds): there the rule is compared, not the field.
func messagesAgree(want, got verdict) bool {
	var answers [][]string
	if m := policyDeny.FindStringSubmatch(got.text); got.kind == "deny" && m != nil {
		answers = append(answers, m)
	} else if got.kind == "warn" {
		for _, w := range strings.Split(got.text, " | ") {
			if m := policyWarning.FindStringSubmatch(w); m != nil {
				answers = append(answers, m)
			}
		}
	}
	for _, a := range answers {
		named := messageRule.FindStringSubmatch(a[2])
		if named == nil {
			continue
		}
		if named[1] != a[1] {
			return false
		}
		if got.kind != "deny" || want.kind != "deny" || want.update {
			continue
		}
		var fields []string
		for _, d := range webhookDenied.FindAllStringSubmatch(want.text, -1) {
			if d[1] == named[1] {
				fields = append(fields, d[2])
			}
		}
		if len(fields) > 0 && !slices.ContainsFunc(fields, func(f string) bool { return sameField(named[2], f) }) {
			return false
		}
	}
	return true
}

// listIndex is a list index in a field path.
var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// sameField reports whether a generated policy's field is the webhook's:
// the same, or the same with its indexes left empty ("containers[]"), as a
// message about an item of a nested list gives it (CEL's exists() does not
// tell which item matched).
func sameField(policy, webhook string) bool {
	return policy == webhook || strings.Contains(policy, "[]") && listIndex.ReplaceAllString(webhook, "[]") == policy
}

// agreesApartFromTheModelName is agrees for a DaemonSet that names the model
// node (nodeName or matchFields metadata.name): the model has that name twice
// (amd64 and arm64), the suite's nodes once (its arm64 model node has another
// name, see suiteNodes), so the generated policies may see
// control-plane-toleration reach a node that the webhook, judging the suite's
// nodes, finds nowhere (modelReachOnly says when). That rule's answers are
// then set aside here and the rest compared; a deny the API server gives for
// that rule alone hides the other policies' answers and leaves nothing to
// compare here: the differential judges every verdict set aside so once more
// with that rule's policies removed, and requires the webhook's verdict then
// (setAsideForTheModelName).
func agreesApartFromTheModelName(want, got verdict) bool {
	if !setAsideForTheModelName(want, got) {
		return agrees(want, got)
	}
	if !messagesAgree(want, got) {
		return false
	}
	if got.kind == "deny" && len(got.rules) == 1 {
		return true
	}
	got.rules = slices.DeleteFunc(slices.Clone(got.rules), func(r string) bool { return r == modelNameRule })
	if got.kind == "warn" && len(got.rules) == 0 {
		got.kind = "allow"
	}
	return agrees(want, got)
}

// modelNameRule is the rule whose generated policy judges the model nodes.
const modelNameRule = "control-plane-toleration"

// setAsideForTheModelName reports whether got answers modelNameRule where
// want does not, the difference agreesApartFromTheModelName sets aside.
func setAsideForTheModelName(want, got verdict) bool {
	return !slices.Contains(want.rules, modelNameRule) && slices.Contains(got.rules, modelNameRule)
}

// missingOnly reports whether got differs from want only by answers
// missing from it (a generated policy not loaded yet stays silent; it never
// answers differently): the only disagreement a retry may clear.
func missingOnly(want, got verdict) bool {
	rank := map[string]int{"allow": 0, "warn": 1, "deny": 2}
	if rank[got.kind] > rank[want.kind] {
		return false
	}
	if got.kind == want.kind && got.kind == "warn" {
		return !slices.ContainsFunc(got.rules, func(r string) bool { return !slices.Contains(want.rules, r) })
	}
	return got.kind != want.kind || agrees(want, got)
}

// warnings records the warnings of the requests of one client; requests run
// one at a time.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.lines
	w.lines = nil
	return out
}

// judge is a client whose dry-run writes come back as verdicts.
type judge struct {
	kube     kubernetes.Interface
	warnings *warnings
}

func newJudge(cfg *rest.Config) (*judge, error) {
	w := &warnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WarningHandlerWithContext = w
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &judge{kube: kube, warnings: w}, nil
}

var dryRun = []string{metav1.DryRunAll}

// create dry-runs a create of ds in namespace.
func (j *judge) create(ctx context.Context, namespace string, ds *appsv1.DaemonSet) (verdict, error) {
	ds = ds.DeepCopy()
	ds.Namespace = namespace
	j.warnings.take()
	_, err := j.kube.AppsV1().DaemonSets(namespace).Create(ctx, ds, metav1.CreateOptions{DryRun: dryRun})
	return j.classify(err)
}

// update dry-runs an update of the stored ds to changed.
func (j *judge) update(ctx context.Context, changed *appsv1.DaemonSet) (verdict, error) {
	j.warnings.take()
	_, err := j.kube.AppsV1().DaemonSets(changed.Namespace).Update(ctx, changed, metav1.UpdateOptions{DryRun: dryRun})
	v, err := j.classify(err)
	v.update = true
	return v, err
}

// classify turns a write's outcome into a verdict. Only dsguard's answers
// count: a deny must come from the webhook or a generated policy, and
// warnings from elsewhere (the API server's own) are ignored.
func (j *judge) classify(err error) (verdict, error) {
	ws := j.warnings.take()
	if err != nil {
		msg := err.Error()
		if (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) &&
			(strings.Contains(msg, `admission webhook "`) || strings.Contains(msg, "ValidatingAdmissionPolicy '"+"dsguard-")) {
			return verdict{kind: "deny", text: msg, rules: rulesOf(msg)}, nil
		}
		return verdict{}, fmt.Errorf("not a dsguard verdict: %w", err)
	}
	var ours, ids []string
	for _, w := range ws {
		if isDsguardWarning(w) {
			ours = append(ours, w)
			ids = append(ids, rulesOf(w)...)
		}
	}
	if len(ours) > 0 {
		slices.Sort(ids)
		return verdict{kind: "warn", text: strings.Join(ours, " | "), rules: slices.Compact(ids)}, nil
	}
	return verdict{kind: "allow"}, nil
}

// isDsguardWarning recognises the webhook's warnings (rule ID first) and the
// generated policies' (named dsguard-...).
func isDsguardWarning(w string) bool {
	if strings.Contains(w, "ValidatingAdmissionPolicy 'dsguard-") || strings.HasPrefix(w, "dsguard:") {
		return true
	}
	for _, r := range rules.Builtin().Rules() {
		if strings.HasPrefix(w, r.ID+": ") {
			return true
		}
	}
	return false
}
