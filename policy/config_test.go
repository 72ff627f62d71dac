package policy

import (
	"slices"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const configHeader = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"

func TestSplitFieldPath(t *testing.T) {
	tests := []struct {
		path string
		want []string
	}{
		{"", nil},
		{"apiVersion", []string{"apiVersion"}},
		{"rules.max-unavailable.action", []string{"rules", "max-unavailable", "action"}},
		{"rules.control-plane-toleration.parameters.taints[0].effect",
			[]string{"rules", "control-plane-toleration", "parameters", "taints", "0", "effect"}},
		{"rules.privileged.scope.selector.matchLabels[app.kubernetes.io/name]",
			[]string{"rules", "privileged", "scope", "selector", "matchLabels", "app.kubernetes.io/name"}},
		{"m[a.b][c.d].e", []string{"m", "a.b", "c.d", "e"}},
		{"x[0][1]", []string{"x", "0", "1"}},
		{"x[unterminated.key", []string{"x", "unterminated.key"}},
		{"[k]", []string{"k"}},
	}
	for _, tt := range tests {
		if got := splitFieldPath(tt.path); !slices.Equal(got, tt.want) {
			t.Errorf("splitFieldPath(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
	// The paths validation produces are what lineOf splits: a key with dots
	// stays one step.
	p := field.NewPath("rules", "privileged", "scope", "selector", "matchLabels").Key("app.kubernetes.io/name")
	if got := splitFieldPath(p.String()); len(got) != 6 || got[5] != "app.kubernetes.io/name" {
		t.Errorf("splitFieldPath(%q) = %q", p, got)
	}
}

func TestLineOf(t *testing.T) {
	doc := configHeader + `rules:
  privileged:
    scope:
      selector:
        matchLabels:
          app.kubernetes.io/name: node-exporter # line 8
          tier: agents
  control-plane-toleration:
    parameters:
      taints:
      - key: a # line 13
        effect: NoSchedule
      - key: b # line 15
        effect: NoExecute
`
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &root); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want int
	}{
		{"", 1},
		{"kind", 2},
		{"rules", 4},
		{"rules.privileged.scope.selector.matchLabels", 8},
		{"rules.privileged.scope.selector.matchLabels[app.kubernetes.io/name]", 8},
		{"rules.privileged.scope.selector.matchLabels[tier]", 9},
		{"rules.control-plane-toleration.parameters.taints[0]", 13},
		{"rules.control-plane-toleration.parameters.taints[1].effect", 16},
		// A mapping or sequence value starts on the line of its first entry.
		// Missing steps fall back to the deepest node that exists.
		{"rules.control-plane-toleration.parameters.taints[7].effect", 13},
		{"rules.control-plane-toleration.parameters.taints[x]", 13},
		{"rules.privileged.action", 5},
		{"ratcheting", 1},
	}
	for _, tt := range tests {
		if got := lineOf(&root, tt.path); got != tt.want {
			t.Errorf("lineOf(%q) = %d, want %d", tt.path, got, tt.want)
		}
	}
	var empty yaml.Node
	if got := lineOf(&empty, "rules.privileged"); got != 0 {
		t.Errorf("lineOf on an empty node = %d, want 0", got)
	}
}
