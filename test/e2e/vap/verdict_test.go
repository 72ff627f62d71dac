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
// webhook's want: the same outcome, and the same rules warning; for a deny,
// the API server names one denying policy of several (the first it ran), so
// that rule must be one the webhook denied with.
func agrees(want, got verdict) bool {
	if want.kind != got.kind {
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
		// The API server names one denying policy: it must be one of the
		// webhook's.
		return len(got.rules) > 0 && !slices.ContainsFunc(got.rules, func(r string) bool { return !slices.Contains(want.rules, r) })
	}
	return true
}

// agreesApartFromTheModelName is agrees for a DaemonSet that names the model
// node (nodeName or matchFields metadata.name): the model has that name twice
// (amd64 and arm64), the suite's nodes once (its arm64 model node has another
// name, see suiteNodes), so the generated policies may see
// control-plane-toleration reach a node that the webhook, judging the suite's
// nodes, finds nowhere. That one rule is then set aside; a deny the API server
// gives for it alone hides the other policies' answers, and is not compared.
func agreesApartFromTheModelName(want, got verdict) bool {
	const rule = "control-plane-toleration"
	if agrees(want, got) || slices.Contains(want.rules, rule) || !slices.Contains(got.rules, rule) {
		return agrees(want, got)
	}
	if got.kind == "deny" && len(got.rules) == 1 {
		return true
	}
	got.rules = slices.DeleteFunc(slices.Clone(got.rules), func(r string) bool { return r == rule })
	if got.kind == "warn" && len(got.rules) == 0 {
		got.kind = "allow"
	}
	return agrees(want, got)
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
	return j.classify(err)
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
			return verdict{"deny", msg, rulesOf(msg)}, nil
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
		return verdict{"warn", strings.Join(ours, " | "), slices.Compact(ids)}, nil
	}
	return verdict{"allow", "", nil}, nil
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
