package rules

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/policy"
)

// configHeader is the smallest valid policy document.
const configHeader = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"

// wantProblem describes a problem ParseConfig must report. Line and Field are
// compared exactly (0 / "" included); Message is a substring.
type wantProblem struct {
	Line    int
	Field   string
	Message string
}

// configProblems parses doc, requires a *ConfigError and returns its problems.
func configProblems(t *testing.T, doc string) []policy.ConfigProblem {
	t.Helper()
	cfg, err := Builtin().ParseConfig([]byte(doc))
	if err == nil {
		t.Fatalf("ParseConfig succeeded, want an error; config: %+v", cfg)
	}
	if cfg != nil {
		t.Errorf("ParseConfig returned a config along with the error %v", err)
	}
	var ce *policy.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *ConfigError", err, err)
	}
	if len(ce.Problems) == 0 {
		t.Fatalf("ConfigError without problems: %v", err)
	}
	return ce.Problems
}

func TestParseConfigErrors(t *testing.T) {
	empty := []wantProblem{{Message: "the policy document is empty"}}
	tests := []struct {
		name string
		doc  string
		want []wantProblem
		// exact requires exactly the wanted problems, no others.
		exact bool
	}{{
		name:  "empty",
		doc:   "",
		want:  empty,
		exact: true,
	}, {
		name:  "whitespace only",
		doc:   " \n\t\n",
		want:  empty,
		exact: true,
	}, {
		name:  "comments only",
		doc:   "# policy goes here\n# later\n",
		want:  empty,
		exact: true,
	}, {
		name:  "bare document marker",
		doc:   "---\n",
		want:  empty,
		exact: true,
	}, {
		name:  "null document",
		doc:   "null\n",
		want:  empty,
		exact: true,
	}, {
		name:  "misspelt top-level key",
		doc:   configHeader + "enforcment: warn\n",
		want:  []wantProblem{{Line: 3, Message: `unknown field "enforcment"`}},
		exact: true,
	}, {
		name: "misspelt rule ID",
		doc: configHeader + `rules:
  privileged:
    action: audit
  max-unavalable:
    action: deny
`,
		want:  []wantProblem{{Line: 6, Message: `unknown field "max-unavalable"`}},
		exact: true,
	}, {
		name: "misspelt parameter key",
		doc: configHeader + `rules:
  max-unavailable:
    parameters:
      maxPercnt: 10
`,
		want:  []wantProblem{{Line: 6, Message: `unknown field "maxPercnt"`}},
		exact: true,
	}, {
		name:  "unknown key with a space",
		doc:   configHeader + "rules:\n  max unavailable:\n    action: deny\n",
		want:  []wantProblem{{Line: 4, Message: `unknown field "max unavailable"`}},
		exact: true,
	}, {
		name:  "unknown key with a line break",
		doc:   configHeader + "\"ratchet\\ning\": true\n",
		want:  []wantProblem{{Line: 3, Message: `unknown field "ratchet\ning"`}},
		exact: true,
	}, {
		name:  "empty key",
		doc:   configHeader + "\"\": x\n",
		want:  []wantProblem{{Line: 3, Message: `unknown field ""`}},
		exact: true,
	}, {
		name: "parameter on a rule without parameters",
		doc: configHeader + `rules:
  privileged:
    parameters:
      allowed: true
`,
		want:  []wantProblem{{Line: 6, Message: `unknown field "allowed"`}},
		exact: true,
	}, {
		name: "misspelt scope key",
		doc: configHeader + `rules:
  privileged:
    scope:
      namespace:
        include: [a]
`,
		want:  []wantProblem{{Line: 6, Message: `unknown field "namespace"`}},
		exact: true,
	}, {
		name: "several unknown fields at once",
		doc: configHeader + `enforcment: warn
ratchting: true
rules:
  max-unavailable:
    parameters:
      maxPercnt: 10
`,
		want: []wantProblem{
			{Line: 3, Message: `unknown field "enforcment"`},
			{Line: 4, Message: `unknown field "ratchting"`},
			{Line: 8, Message: `unknown field "maxPercnt"`},
		},
		exact: true,
	}, {
		name: "invalid action",
		doc: configHeader + `rules:
  privileged:
    action: warn
  max-unavailable:
    action: block
`,
		want: []wantProblem{{Line: 7, Field: "rules.max-unavailable.action",
			Message: `Unsupported value: "block": supported values: "deny", "warn", "audit", "off"`}},
		exact: true,
	}, {
		name: "several validation errors at once",
		doc: configHeader + `enforcement: strict
namespaceEnforcement:
- namespaces: []
  enforcement: enforce
rules:
  max-unavailable:
    action: block
    parameters:
      maxPercent: 150
      maxCount: -1
  privileged:
    scope:
      namespaces:
        exclude: ["[", ok]
  host-path-read-only:
    parameters:
      allowWritable: [var/log]
`,
		want: []wantProblem{
			{Line: 3, Field: "enforcement", Message: `Unsupported value: "strict"`},
			{Line: 5, Field: "namespaceEnforcement[0].namespaces", Message: "Required value"},
			{Line: 9, Field: "rules.max-unavailable.action", Message: `"block"`},
			{Line: 11, Field: "rules.max-unavailable.parameters.maxPercent", Message: "between 0 and 100"},
			{Line: 12, Field: "rules.max-unavailable.parameters.maxCount", Message: "0 (no cap) or more"},
			{Line: 16, Field: "rules.privileged.scope.namespaces.exclude[0]", Message: "not a valid glob"},
			{Line: 19, Field: "rules.host-path-read-only.parameters.allowWritable[0]", Message: "absolute path"},
		},
		exact: true,
	}, {
		name:  "wrong apiVersion",
		doc:   "apiVersion: dsguard.io/v1\nkind: PolicyConfig\n",
		want:  []wantProblem{{Line: 1, Field: "apiVersion", Message: `Unsupported value: "dsguard.io/v1"`}},
		exact: true,
	}, {
		name:  "wrong kind",
		doc:   "apiVersion: dsguard.io/v1alpha1\nkind: Policy\n",
		want:  []wantProblem{{Line: 2, Field: "kind", Message: `Unsupported value: "Policy"`}},
		exact: true,
	}, {
		name: "apiVersion and kind missing",
		doc:  "enforcement: warn\n",
		want: []wantProblem{
			{Line: 1, Field: "apiVersion", Message: "Required value"},
			{Line: 1, Field: "kind", Message: "Required value"},
		},
		exact: true,
	}, {
		name: "apiVersion and kind missing from an empty mapping",
		doc:  "{}\n",
		want: []wantProblem{
			{Line: 1, Field: "apiVersion", Message: "Required value"},
			{Line: 1, Field: "kind", Message: "Required value"},
		},
		exact: true,
	}, {
		name: "bad namespace glob in namespaceEnforcement",
		doc: configHeader + `namespaceEnforcement:
- namespaces: [kube-system, "["]
  enforcement: warn
`,
		want: []wantProblem{{Line: 4, Field: "namespaceEnforcement[0].namespaces[1]",
			Message: "not a valid glob: syntax error in pattern"}},
		exact: true,
	}, {
		name: "bad namespace glob in a rule scope",
		doc: configHeader + `rules:
  readiness-probe:
    scope:
      namespaces:
        include:
        - team-*
        - "["
`,
		want:  []wantProblem{{Line: 9, Field: "rules.readiness-probe.scope.namespaces.include[1]", Message: "not a valid glob"}},
		exact: true,
	}, {
		name: "empty namespace glob",
		doc: configHeader + `rules:
  readiness-probe:
    scope:
      namespaces:
        include: [""]
`,
		want:  []wantProblem{{Line: 7, Field: "rules.readiness-probe.scope.namespaces.include[0]", Message: "must not be empty"}},
		exact: true,
	}, {
		name: "invalid namespace enforcement",
		doc: configHeader + `namespaceEnforcement:
- namespaces: [kube-system]
  enforcement: deny
`,
		want:  []wantProblem{{Line: 5, Field: "namespaceEnforcement[0].enforcement", Message: `"deny": supported values: "enforce", "warn", "audit"`}},
		exact: true,
	}, {
		name: "invalid label selector operator",
		doc: configHeader + `rules:
  privileged:
    scope:
      selector:
        matchExpressions:
        - key: tier
          operator: Includes
          values: [agents]
`,
		want: []wantProblem{{Line: 9, Field: "rules.privileged.scope.selector.matchExpressions[0].operator",
			Message: `"Includes": not a valid selector operator`}},
		exact: true,
	}, {
		name: "label selector In without values",
		doc: configHeader + `rules:
  privileged:
    scope:
      selector:
        matchExpressions:
        - key: tier
          operator: In
`,
		want: []wantProblem{{Line: 8, Field: "rules.privileged.scope.selector.matchExpressions[0].values",
			Message: "Required value"}},
		exact: true,
	}, {
		name: "invalid label selector value",
		doc: configHeader + `rules:
  privileged:
    scope:
      selector:
        matchLabels:
          app.kubernetes.io/name: "not a label value!"
`,
		// The error names the map, not the key; its line is that of the
		// map's first entry.
		want: []wantProblem{{Line: 8, Field: "rules.privileged.scope.selector.matchLabels",
			Message: `"not a label value!"`}},
		exact: true,
	}, {
		name: "PreferNoSchedule taint",
		doc: configHeader + `rules:
  control-plane-toleration:
    parameters:
      taints:
      - key: node-role.kubernetes.io/control-plane
        effect: PreferNoSchedule
`,
		want: []wantProblem{{Line: 8, Field: "rules.control-plane-toleration.parameters.taints[0].effect",
			Message: "PreferNoSchedule never keeps a DaemonSet off a node"}},
		exact: true,
	}, {
		name: "taint without key and with unknown effect",
		doc: configHeader + `rules:
  control-plane-toleration:
    parameters:
      taints:
      - key: node-role.kubernetes.io/control-plane
        effect: NoSchedule
      - effect: Sometimes
`,
		want: []wantProblem{
			{Line: 9, Field: "rules.control-plane-toleration.parameters.taints[1].key", Message: "Required value"},
			{Line: 9, Field: "rules.control-plane-toleration.parameters.taints[1].effect",
				Message: `Unsupported value: "Sometimes": supported values: "NoSchedule", "NoExecute"`},
		},
		exact: true,
	}, {
		name: "taint key that is not a qualified name",
		doc: configHeader + `rules:
  control-plane-toleration:
    parameters:
      taints: [{key: "bad key", effect: NoSchedule}]
`,
		want:  []wantProblem{{Line: 6, Field: "rules.control-plane-toleration.parameters.taints[0].key", Message: `"bad key"`}},
		exact: true,
	}, {
		name: "type error",
		doc: configHeader + `rules:
  max-unavailable:
    parameters:
      maxPercent: abc
`,
		want:  []wantProblem{{Line: 6, Message: "cannot unmarshal !!str `abc` into int"}},
		exact: true,
	}, {
		name:  "type error on a struct",
		doc:   configHeader + "rules: 5\n",
		want:  []wantProblem{{Line: 3, Message: "cannot unmarshal !!int `5` into the expected type"}},
		exact: true,
	}, {
		name: "type error on a Kubernetes type",
		doc: configHeader + `rules:
  control-plane-toleration:
    parameters:
      taints: [{key: a, effect: [NoSchedule]}]
`,
		want:  []wantProblem{{Line: 6, Message: "cannot unmarshal !!seq into the expected type"}},
		exact: true,
	}, {
		name:  "type error on a generic type",
		doc:   configHeader + "rules:\n  max-unavailable: 0\n",
		want:  []wantProblem{{Line: 4, Message: "cannot unmarshal !!int `0` into the expected type"}},
		exact: true,
	}, {
		name:  "type error on a list of structs",
		doc:   configHeader + "rules:\n  control-plane-toleration:\n    parameters:\n      taints: {key: a}\n",
		want:  []wantProblem{{Line: 6, Message: "cannot unmarshal !!map into the expected type"}},
		exact: true,
	}, {
		name:  "type error on a map",
		doc:   configHeader + "rules:\n  privileged:\n    scope:\n      selector:\n        matchLabels: [a]\n",
		want:  []wantProblem{{Line: 7, Message: "cannot unmarshal !!seq into map[string]string"}},
		exact: true,
	}, {
		name:  "not a mapping",
		doc:   "just some text\n",
		want:  []wantProblem{{Line: 1, Message: "into the expected type"}},
		exact: true,
	}, {
		name:  "ratcheting null",
		doc:   configHeader + "ratcheting: ~\n",
		want:  []wantProblem{{Line: 3, Field: "ratcheting", Message: "Required value"}},
		exact: true,
	}, {
		name:  "duplicate key",
		doc:   configHeader + "enforcement: warn\nenforcement: audit\n",
		want:  []wantProblem{{Line: 4, Message: `mapping key "enforcement" already defined at line 3`}},
		exact: true,
	}, {
		name:  "YAML syntax error",
		doc:   configHeader + "rules: [\n",
		want:  []wantProblem{{Line: 3, Message: "did not find expected node content"}},
		exact: true,
	}, {
		name:  "two documents",
		doc:   configHeader + "---\n" + configHeader,
		want:  []wantProblem{{Line: 3, Message: "more than one YAML document"}},
		exact: true,
	}, {
		name:  "a second, broken document",
		doc:   configHeader + "---\nrules: [\n",
		want:  []wantProblem{{Message: "more than one YAML document"}},
		exact: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := configProblems(t, tt.doc)
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, w.matches) {
					t.Errorf("missing problem %+v\ngot:\n%s", w, problemList(got))
				}
			}
			if tt.exact && len(got) != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%s", len(got), len(tt.want), problemList(got))
			}
			for _, p := range got {
				// yaml.v3 names Go types ("policy.MaxUnavailableParams",
				// "v1.TaintEffect"); the person fixing a ConfigMap needs the key.
				for _, leak := range []string{"policy.", "v1.", "Params", "RuleConfig"} {
					if strings.Contains(p.Message, leak) {
						t.Errorf("problem %q mentions the Go type name part %q", p, leak)
					}
				}
				if strings.Contains(p.Message, "\n") {
					t.Errorf("problem %q spans several lines", p)
				}
			}
		})
	}
}

func (w wantProblem) matches(p policy.ConfigProblem) bool {
	return p.Line == w.Line && p.Field == w.Field && strings.Contains(p.Message, w.Message)
}

func problemList(ps []policy.ConfigProblem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  ")
		b.WriteString(p.String())
		b.WriteString("\n")
	}
	return b.String()
}

func TestConfigErrorMessage(t *testing.T) {
	problems := configProblems(t, configHeader+"enforcement: strict\nrules:\n  privileged:\n    action: block\n")
	err := &policy.ConfigError{Problems: problems}
	want := `invalid policy: line 3: enforcement: Unsupported value: "strict": supported values: "enforce", "warn", "audit"; ` +
		`line 6: rules.privileged.action: Unsupported value: "block": supported values: "deny", "warn", "audit", "off"`
	if got := err.Error(); got != want {
		t.Errorf("Error() =\n  %s\nwant\n  %s", got, want)
	}
	if got := (policy.ConfigProblem{Message: "m"}).String(); got != "m" {
		t.Errorf("problem without line and field = %q, want %q", got, "m")
	}
}

func TestParseConfigMinimalIsDefault(t *testing.T) {
	cfg, err := Builtin().ParseConfig([]byte(configHeader))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if !reflect.DeepEqual(cfg, Builtin().DefaultConfig()) {
		t.Errorf("minimal document = %+v, want the defaults %+v", cfg, Builtin().DefaultConfig())
	}
	for _, rule := range Builtin().Rules() {
		o := cfg.Rules.Options(rule.ID)
		if o == nil {
			t.Fatalf("rule %s has no part in the config", rule.ID)
		}
		if o.Action != rule.DefaultAction || o.AllowExemptions != nil {
			t.Errorf("rule %s: action %q allowExemptions %v, want %q and unset", rule.ID, o.Action, o.AllowExemptions, rule.DefaultAction)
		}
	}
	if cfg.Enforcement != policy.EnforcementEnforce {
		t.Errorf("enforcement = %q, want enforce", cfg.Enforcement)
	}
	wantNS := []policy.NamespaceEnforcementConfig{{Namespaces: policy.InfrastructureNamespaces, Enforcement: policy.EnforcementWarn}}
	if !reflect.DeepEqual(cfg.NamespaceEnforcement, wantNS) {
		t.Errorf("namespaceEnforcement = %+v, want %+v", cfg.NamespaceEnforcement, wantNS)
	}
	if cfg.Ratcheting == nil || !*cfg.Ratcheting {
		t.Errorf("ratcheting = %v, want true", cfg.Ratcheting)
	}
	if got := policy.RuleConfigOf[MaxUnavailableParams](cfg, maxUnavailableID).Parameters; got != (MaxUnavailableParams{MaxPercent: 25}) {
		t.Errorf("max-unavailable parameters = %+v, want maxPercent 25, maxCount 0", got)
	}
	wantTaints := []TaintConfig{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	if got := policy.RuleConfigOf[ControlPlaneTolerationParams](cfg, controlPlaneTolerationID).Parameters.Taints; !reflect.DeepEqual(got, wantTaints) {
		t.Errorf("control-plane-toleration taints = %+v, want %+v", got, wantTaints)
	}

	p, err := policy.Compile(cfg)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	if !p.Ratcheting() || p.Enforcement() != policy.EnforcementEnforce {
		t.Errorf("compiled ratcheting %v enforcement %q, want true and enforce", p.Ratcheting(), p.Enforcement())
	}
	for _, ns := range []string{"kube-system", "default", "monitoring"} {
		want := policy.ActionDeny
		if ns == "kube-system" {
			want = policy.ActionWarn
		}
		if got := p.CeilingFor(ns); got != want {
			t.Errorf("ceiling in %s = %q, want %q", ns, got, want)
		}
	}
}

func TestDefaultPolicyActions(t *testing.T) {
	p := Builtin().Default()
	for _, r := range Builtin().Rules() {
		got, ok := p.RuleAction(r.ID)
		if !ok || got != r.DefaultAction {
			t.Errorf("RuleAction(%s) = %q, %v; want %q", r.ID, got, ok, r.DefaultAction)
		}
	}
	if _, ok := p.RuleAction("no-such-rule"); ok {
		t.Error("RuleAction of an unknown rule reports ok")
	}
}

func TestParseConfigOverrides(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(t *testing.T, c *policy.Config)
	}{{
		name: "partial parameter override keeps the other defaults",
		doc: configHeader + `rules:
  max-unavailable:
    parameters:
      maxCount: 3
`,
		check: func(t *testing.T, c *policy.Config) {
			want := MaxUnavailableParams{MaxPercent: 25, MaxCount: 3}
			if got := policy.RuleConfigOf[MaxUnavailableParams](c, maxUnavailableID).Parameters; got != want {
				t.Errorf("max-unavailable parameters = %+v, want %+v", got, want)
			}
			if policy.RuleConfigOf[MaxUnavailableParams](c, maxUnavailableID).Action != policy.ActionWarn {
				t.Errorf("max-unavailable action = %q, want the default warn", policy.RuleConfigOf[MaxUnavailableParams](c, maxUnavailableID).Action)
			}
			d := Builtin().DefaultConfig()
			policy.RuleConfigOf[MaxUnavailableParams](d, maxUnavailableID).Parameters.MaxCount = 3
			if !reflect.DeepEqual(c, d) {
				t.Errorf("config = %+v, want the defaults but maxCount 3", c)
			}
		},
	}, {
		name: "a list replaces the default list",
		doc: configHeader + `rules:
  control-plane-toleration:
    parameters:
      taints:
      - key: example.com/dedicated
        value: infra
        effect: NoExecute
`,
		check: func(t *testing.T, c *policy.Config) {
			want := []TaintConfig{{Key: "example.com/dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute}}
			if got := policy.RuleConfigOf[ControlPlaneTolerationParams](c, controlPlaneTolerationID).Parameters.Taints; !reflect.DeepEqual(got, want) {
				t.Errorf("taints = %+v, want %+v (the default control-plane taint replaced)", got, want)
			}
		},
	}, {
		name: "an empty list requires no taint",
		doc:  configHeader + "rules:\n  control-plane-toleration:\n    parameters:\n      taints: []\n",
		check: func(t *testing.T, c *policy.Config) {
			if got := policy.RuleConfigOf[ControlPlaneTolerationParams](c, controlPlaneTolerationID).Parameters.Taints; len(got) != 0 {
				t.Errorf("taints = %+v, want none", got)
			}
		},
	}, {
		name: "namespaceEnforcement replaces the kube-system default",
		doc: configHeader + `namespaceEnforcement:
- namespaces: ["team-*"]
  enforcement: audit
`,
		check: func(t *testing.T, c *policy.Config) {
			want := []policy.NamespaceEnforcementConfig{{Namespaces: []string{"team-*"}, Enforcement: policy.EnforcementAudit}}
			if !reflect.DeepEqual(c.NamespaceEnforcement, want) {
				t.Errorf("namespaceEnforcement = %+v, want %+v", c.NamespaceEnforcement, want)
			}
		},
	}, {
		name: "global settings",
		doc:  configHeader + "enforcement: warn\nratcheting: false\nbypass:\n  users: [alice]\n  groups: [sre]\n",
		check: func(t *testing.T, c *policy.Config) {
			if c.Enforcement != policy.EnforcementWarn || c.Ratcheting == nil || *c.Ratcheting {
				t.Errorf("enforcement %q ratcheting %v, want warn and false", c.Enforcement, c.Ratcheting)
			}
			want := policy.BypassConfig{Users: []string{"alice"}, Groups: []string{"sre"}}
			if !reflect.DeepEqual(c.Bypass, want) {
				t.Errorf("bypass = %+v, want %+v", c.Bypass, want)
			}
		},
	}, {
		name: "unquoted off is the action, not a YAML 1.1 boolean",
		doc:  configHeader + "rules:\n  update-strategy:\n    action: off\n",
		check: func(t *testing.T, c *policy.Config) {
			if policy.RuleConfigOf[policy.NoParams](c, updateStrategyID).Action != policy.ActionOff {
				t.Errorf("update-strategy action = %q, want off", policy.RuleConfigOf[policy.NoParams](c, updateStrategyID).Action)
			}
		},
	}, {
		name: "a null rule keeps its defaults",
		doc:  configHeader + "rules:\n  privileged: ~\n",
		check: func(t *testing.T, c *policy.Config) {
			if !reflect.DeepEqual(c, Builtin().DefaultConfig()) {
				t.Errorf("config = %+v, want the defaults", c)
			}
		},
	}, {
		name: "allowExemptions and scope",
		doc: configHeader + `rules:
  privileged:
    allowExemptions: false
    scope:
      namespaces: {include: ["team-*"], exclude: [team-legacy]}
      selector:
        matchLabels: {app.kubernetes.io/name: node-exporter}
`,
		check: func(t *testing.T, c *policy.Config) {
			r := policy.RuleConfigOf[policy.NoParams](c, privilegedID)
			if r.AllowExemptions == nil || *r.AllowExemptions {
				t.Errorf("allowExemptions = %v, want false", r.AllowExemptions)
			}
			wantNS := policy.NamespaceScopeConfig{Include: []string{"team-*"}, Exclude: []string{"team-legacy"}}
			if !reflect.DeepEqual(r.Scope.Namespaces, wantNS) {
				t.Errorf("scope namespaces = %+v, want %+v", r.Scope.Namespaces, wantNS)
			}
			if r.Scope.Selector == nil || r.Scope.Selector.MatchLabels["app.kubernetes.io/name"] != "node-exporter" {
				t.Errorf("scope selector = %+v", r.Scope.Selector)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Builtin().ParseConfig([]byte(tt.doc))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			tt.check(t, c)
			if _, err := policy.Compile(c); err != nil {
				t.Errorf("Compile: %v", err)
			}
		})
	}
}

// TestParseConfigDoesNotShareDefaults guards against decoding into shared
// default values: one document's override must not leak into the next.
func TestParseConfigDoesNotShareDefaults(t *testing.T) {
	if _, err := Builtin().ParseConfig([]byte(configHeader + `namespaceEnforcement:
- namespaces: [other]
  enforcement: audit
rules:
  control-plane-toleration:
    parameters:
      taints: [{key: example.com/x, effect: NoExecute}]
`)); err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	c, err := Builtin().ParseConfig([]byte(configHeader))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if !reflect.DeepEqual(c, Builtin().DefaultConfig()) {
		t.Errorf("a later minimal document = %+v, want the defaults", c)
	}
}

// TestParseConfigFull parses a document that sets every option once.
func TestParseConfigFull(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "config", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Builtin().Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if p.Ratcheting() {
		t.Error("ratcheting: false was not applied")
	}
	if !p.Bypassed("alice@example.com", nil) || !p.Bypassed("bob", []string{"sre-break-glass"}) {
		t.Error("bypass lists were not applied")
	}
	if a, _ := p.RuleAction(updateStrategyID); a != policy.ActionOff {
		t.Errorf("update-strategy action = %q, want off", a)
	}
	if a, _ := p.RuleAction(readinessProbeID); a != policy.ActionAudit {
		t.Errorf("readiness-probe action = %q, want audit", a)
	}
	for ns, want := range map[string]policy.Action{"team-a": policy.ActionAudit, "sandbox": policy.ActionAudit, "kube-system": policy.ActionWarn, "prod": policy.ActionDeny} {
		if got := p.CeilingFor(ns); got != want {
			t.Errorf("ceiling in %s = %q, want %q", ns, got, want)
		}
	}
	if p.AllowsExemptions(controlPlaneTolerationID) {
		t.Error("allowExemptions: false was not applied")
	}
	if got, _ := policy.ParamsOf[MaxUnavailableParams](p, maxUnavailableID); *got != (MaxUnavailableParams{MaxPercent: 10, MaxCount: 5}) {
		t.Errorf("max-unavailable parameters = %+v", *got)
	}
}

func TestCompileRejectsInvalidConfig(t *testing.T) {
	c := Builtin().DefaultConfig()
	policy.RuleConfigOf[policy.NoParams](c, privilegedID).Action = "block"
	c.Ratcheting = nil
	_, err := policy.Compile(c)
	var ce *policy.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Compile error %v (%T), want *ConfigError", err, err)
	}
	var fields []string
	for _, p := range ce.Problems {
		fields = append(fields, p.Field)
	}
	slices.Sort(fields)
	if want := []string{"ratcheting", "rules.privileged.action"}; !slices.Equal(fields, want) {
		t.Errorf("fields = %v, want %v", fields, want)
	}
}

// TestRulesConfigMatchesRegistry: every rule of the registry, and only those,
// is configurable under its ID, typed with its own parameters.
func TestRulesConfigMatchesRegistry(t *testing.T) {
	cfg := Builtin().DefaultConfig()
	if len(cfg.Rules.IDs()) != len(Builtin().Rules()) {
		t.Errorf("config has %d rules, registry %d", len(cfg.Rules.IDs()), len(Builtin().Rules()))
	}
	for _, r := range Builtin().Rules() {
		if cfg.Rules.Options(r.ID) == nil {
			t.Errorf("rule %s has no part in the config", r.ID)
		}
	}
	if cfg.Rules.Options("no-such-rule") != nil {
		t.Error("options for a rule that does not exist")
	}
	if policy.RuleConfigOf[MaxUnavailableParams](cfg, maxUnavailableID) == nil {
		t.Error("max-unavailable is not typed with MaxUnavailableParams")
	}
	if policy.RuleConfigOf[policy.NoParams](cfg, maxUnavailableID) != nil {
		t.Error("max-unavailable typed with NoParams")
	}
}

// TestRegistryRulesWellFormed holds every rule to the catalogue's standard:
// what the generated docs and `dsguard rules` print must read well.
func TestRegistryRulesWellFormed(t *testing.T) {
	paramsType := map[string]reflect.Type{}
	cfg := Builtin().DefaultConfig()
	for _, id := range cfg.Rules.IDs() {
		paramsType[id] = reflect.TypeOf(cfg.Rules.Params(id)).Elem()
	}
	for _, r := range Builtin().Rules() {
		t.Run(r.ID, func(t *testing.T) {
			if _, err := policy.NewRegistry(r); err != nil {
				t.Error(err)
			}
			if r.Title == "" || strings.HasSuffix(r.Title, ".") || strings.Contains(r.Title, "\n") {
				t.Errorf("title %q: want a one-line phrase without a final period", r.Title)
			}
			for name, text := range map[string]string{"why": r.Why, "remediation": r.Remediation} {
				if !strings.HasSuffix(text, ".") {
					t.Errorf("%s %q does not end with a period", name, text)
				}
				if strings.TrimSpace(text) != text || strings.Contains(text, "\n") || strings.Contains(text, "  ") {
					t.Errorf("%s %q has stray whitespace", name, text)
				}
			}
			if !r.DefaultAction.Valid() || r.DefaultAction == policy.ActionOff {
				t.Errorf("default action %q: want deny, warn or audit", r.DefaultAction)
			}
			// The documented parameters are exactly the keys of the
			// parameter type, in order.
			pt, ok := paramsType[r.ID]
			if !ok {
				t.Fatalf("no config entry")
			}
			var keys []string
			for f := range pt.Fields() {
				keys = append(keys, f.Tag.Get("yaml"))
			}
			var documented []string
			for _, p := range r.Params {
				documented = append(documented, p.Name)
				if p.Type == "" || p.Default == "" || !strings.HasSuffix(p.Description, ".") {
					t.Errorf("parameter %s: type, default and a description ending with a period are required", p.Name)
				}
			}
			if !slices.Equal(keys, documented) {
				t.Errorf("parameter keys %v, documented %v", keys, documented)
			}
		})
	}
}

func TestNewRegistryRejects(t *testing.T) {
	good := func(id string) *policy.Rule {
		return policy.NewRule(policy.Rule{ID: id, Title: "T", Why: "W.", Remediation: "R.", DefaultAction: policy.ActionWarn}, nil,
			func(*appsv1.DaemonSet, *policy.Env, *policy.NoParams) []policy.Finding { return nil })
	}
	tests := []struct {
		name  string
		rules []*policy.Rule
		want  string
	}{
		{"duplicate", []*policy.Rule{good("a-b"), good("a-b")}, `duplicate rule ID "a-b"`},
		{"not kebab-case", []*policy.Rule{good("Foo_bar")}, "not kebab-case"},
		{"trailing dash", []*policy.Rule{good("foo-")}, "not kebab-case"},
		{"no remediation period", []*policy.Rule{func() *policy.Rule { r := good("x"); r.Remediation = "do it"; return r }()}, "period"},
		{"no title", []*policy.Rule{func() *policy.Rule { r := good("x"); r.Title = ""; return r }()}, "title"},
		{"bad default", []*policy.Rule{func() *policy.Rule { r := good("x"); r.DefaultAction = "block"; return r }()}, "default action"},
		{"no check", []*policy.Rule{{ID: "x", Title: "T", Why: "W.", Remediation: "R.", DefaultAction: policy.ActionWarn}}, "not made by NewRule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := policy.NewRegistry(tt.rules...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewRegistry error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := policy.NewRegistry(good("a"), good("b-c")); err != nil {
		t.Errorf("NewRegistry of good rules: %v", err)
	}
}

func TestParseConfig_TrailingSeparatorAndEmptyBypass(t *testing.T) {
	if _, err := Builtin().ParseConfig([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n---\n")); err != nil {
		t.Errorf("a trailing --- must be accepted: %v", err)
	}
	if _, err := Builtin().ParseConfig([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n---\n---\nenforcement: warn\n")); err == nil {
		t.Error("a second non-empty document must be refused")
	}
	_, err := Builtin().ParseConfig([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nbypass:\n  users: [\"\"]\n  groups: [ops, \"\"]\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4: bypass.users[0]: Invalid value") ||
		!strings.Contains(err.Error(), "bypass.groups[1]: Invalid value") {
		t.Errorf("empty bypass entries: got %v", err)
	}
}
