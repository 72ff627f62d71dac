package rules

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

// Mutators for newDS.

// testEnv is the environment of direct check calls: the built-in policy
// (as Evaluate would hand in) and the fixed time.
func testEnv() *policy.Env { return &policy.Env{Policy: Builtin().Default(), Now: testobj.Now} }

// wantFinding describes an expected finding: the exact field path, the action
// the check itself sets ("" for none), what the message must start with
// (prefix, "" for anything), fragments it must contain (msg) and fragments it
// must not contain (absent).
type wantFinding struct {
	field  string
	action policy.Action
	prefix string
	msg    []string
	absent []string
}

// assertFindings compares findings in order against the expectations.
func assertFindings(t *testing.T, got []policy.Finding, want []wantFinding) {
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
func compileErr(t *testing.T, cfg *policy.Config, fieldPath string) {
	t.Helper()
	_, err := policy.Compile(cfg)
	if err == nil {
		t.Fatalf("Compile accepted the config, want an error at %s", fieldPath)
	}
	ce, ok := err.(*policy.ConfigError)
	if !ok {
		t.Fatalf("Compile error %T %v, want *ConfigError", err, err)
	}
	if !slices.ContainsFunc(ce.Problems, func(p policy.ConfigProblem) bool { return p.Field == fieldPath }) {
		t.Errorf("Compile error %v does not name %s", err, fieldPath)
	}
}

// assertRemediation checks that fs is one finding whose remediation is want.
func assertRemediation(t *testing.T, fs []policy.Finding, want string) {
	t.Helper()
	if len(fs) != 1 {
		t.Fatalf("got %d findings, want 1:\n%s", len(fs), describeFindings(fs))
	}
	if fs[0].Remediation != want {
		t.Errorf("remediation %q, want %q", fs[0].Remediation, want)
	}
}

func describeFindings(fs []policy.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.RuleID + " " + string(f.Action) + " " + f.FieldString() + ": " + f.Message + "\n")
	}
	return b.String()
}

// findingsOf returns the findings of one rule.
func findingsOf(fs []policy.Finding, ruleID string) []policy.Finding {
	var out []policy.Finding
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
	if fs := policy.Evaluate(testobj.DS(), policy.Env{Policy: Builtin().Default(), Now: testobj.Now}); len(fs) > 0 {
		t.Fatalf("newDS() is not compliant:\n%s", describeFindings(fs))
	}
}

// Node builders for the coverage tests.

// nodeEnv is testEnv with nodes.
func nodeEnv(nodes *coverage.NodeSnapshot) *policy.Env {
	env := testEnv()
	env.Nodes = nodes
	return env
}

// snapshotOf builds a snapshot of nodes given as *corev1.Node,
// []*corev1.Node or []any of those.
func snapshotOf(nodes ...any) *coverage.NodeSnapshot {
	return coverage.NewNodeSnapshot(testobj.Nodes(nodes...))
}
