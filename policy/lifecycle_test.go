package policy_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

func TestConfig_LifecycleTaints(t *testing.T) {
	tests := []struct {
		name    string
		entries string
		// lifecycle are keys the compiled policy holds, others keys it
		// does not.
		lifecycle, others []string
		// problems are "field: message part", one per problem, in order.
		problems []string
	}{
		{name: "none", entries: "[]", others: []string{"node.cilium.io/agent-not-ready"}},
		{name: "keys and prefixes", entries: "[example.com/agent-not-ready, startup.example.com/*, dedicated, team-*]",
			lifecycle: []string{"example.com/agent-not-ready", "startup.example.com/gpu", "dedicated", "team-a"},
			others:    []string{"example.com/agent-not-ready-x", "startup.example.com", "dedicated2", "team"}},
		{name: "every mistake at once", entries: `["", "*", "example.com/*/x", "exa*mple.com/x", "Example.com/", "example.com/", "-bad*", "a/b/c", "dup", "dup"]`,
			problems: []string{
				"lifecycleTaints[0]: must not be empty",
				"lifecycleTaints[1]: a lone * would make every taint a lifecycle taint",
				"lifecycleTaints[2]: * may only end an entry",
				"lifecycleTaints[3]: * may only end an entry",
				"lifecycleTaints[4]: not a valid taint key",
				"lifecycleTaints[5]: not a valid taint key",
				"lifecycleTaints[6]: no valid taint key starts with it",
				"lifecycleTaints[7]: not a valid taint key",
				"lifecycleTaints[9]: Duplicate value",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := rules.Builtin().ParseConfig([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nlifecycleTaints: " + tt.entries + "\n"))
			var ce *policy.ConfigError
			if len(tt.problems) > 0 {
				if !errors.As(err, &ce) || len(ce.Problems) != len(tt.problems) {
					t.Fatalf("got %v, want %d problems", err, len(tt.problems))
				}
				for i, want := range tt.problems {
					field, msg, _ := strings.Cut(want, ": ")
					if p := ce.Problems[i]; p.Field != field || !strings.Contains(p.Message, msg) || p.Line != 3 {
						t.Errorf("problem %d = %s (line %d), want %s on line 3", i, p, p.Line, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := policy.Compile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.lifecycle {
				if r, ok := p.LifecycleTaints().Reason(k); !ok || r != "declared by the policy" {
					t.Errorf("%s: %q, %v; want the policy's", k, r, ok)
				}
			}
			for _, k := range tt.others {
				if _, ok := p.LifecycleTaints().Reason(k); ok {
					t.Errorf("%s: a lifecycle taint of the policy", k)
				}
			}
		})
	}
}

// TestEnv_CoverageMarksThePolicysLifecycleTaints: the rules, the audit and
// check read coverage through Env, which marks the policy's lifecycle taints
// on top of the snapshot's: node-coverage then finds no gap for them.
func TestEnv_CoverageMarksThePolicysLifecycleTaints(t *testing.T) {
	nodes := coverage.NewNodeSnapshot([]*corev1.Node{
		testobj.Node("ready-1"),
		testobj.Node("infra-1", testobj.NodeTaints(testobj.NoSchedule("dedicated"))),
		testobj.Node("cilium-1", testobj.NodeTaints(testobj.NoExecute("node.cilium.io/agent-not-ready"))),
	})
	ds := testobj.DS(testobj.WithTolerations())
	for _, tt := range []struct {
		doc      string
		gaps     int
		findings int
	}{
		{doc: "", gaps: 1, findings: 1},
		{doc: "lifecycleTaints: [dedicated]\n", gaps: 0, findings: 0},
	} {
		cfg, err := rules.Builtin().ParseConfig([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n" + tt.doc))
		if err != nil {
			t.Fatal(err)
		}
		p, err := policy.Compile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		env := policy.Env{Policy: p, Nodes: nodes}
		if got := env.Coverage(ds).GapNodes(); got != tt.gaps {
			t.Errorf("%q: %d gap nodes, want %d", tt.doc, got, tt.gaps)
		}
		n := 0
		for _, f := range policy.Evaluate(ds, env) {
			if f.RuleID == "node-coverage" {
				n++
			}
		}
		if n != tt.findings {
			t.Errorf("%q: %d node-coverage findings, want %d", tt.doc, n, tt.findings)
		}
	}
}
