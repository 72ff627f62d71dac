package vap

import (
	"context"
	"fmt"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dsguard/dsguard/policy/rules"
)

// verdict is what a DaemonSet write got from dsguard: deny, warn or allow.
type verdict struct {
	kind string // "deny", "warn", "allow"
	text string // the deny message or the warnings, for failure output
}

func (v verdict) String() string { return v.kind + ": " + v.text }

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
			return verdict{"deny", msg}, nil
		}
		return verdict{}, fmt.Errorf("not a dsguard verdict: %w", err)
	}
	var ours []string
	for _, w := range ws {
		if isDsguardWarning(w) {
			ours = append(ours, w)
		}
	}
	if len(ours) > 0 {
		return verdict{"warn", strings.Join(ours, " | ")}, nil
	}
	return verdict{"allow", ""}, nil
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
