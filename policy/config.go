package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The policy document's type.
const (
	ConfigAPIVersion = "dsguard.io/v1alpha1"
	ConfigKind       = "PolicyConfig"
)

// Config is the policy document as written. yaml.v3 ignores json tags and
// Kubernetes' own decoders, so every field carries a yaml tag and plain types;
// Compile converts to Kubernetes types after validation.
type Config struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	// Enforcement caps every action policy-wide: enforce | warn | audit.
	Enforcement Enforcement `yaml:"enforcement"`
	// NamespaceEnforcement caps actions in matching namespaces; the first entry
	// whose globs match wins.
	NamespaceEnforcement []NamespaceEnforcementConfig `yaml:"namespaceEnforcement"`
	// Ratcheting turns a deny into a warning on UPDATE when the same rule and
	// field were already violated by the old object.
	Ratcheting *bool `yaml:"ratcheting"`
	// Bypass names users and groups whose requests are admitted unchecked
	// (break-glass). Each bypass is logged and counted.
	Bypass BypassConfig `yaml:"bypass"`
	// Exemptions says which exemption annotations take effect.
	Exemptions ExemptionsConfig `yaml:"exemptions"`
	// LifecycleTaints adds to the built-in lifecycle taints, which a node
	// carries for a while (joining, an agent getting ready) and which never
	// make a coverage finding: taint keys, or prefixes ending in *.
	LifecycleTaints []string `yaml:"lifecycleTaints"`
	// Rules configures each rule by ID.
	Rules RulesConfig `yaml:"rules"`
}

// InfrastructureNamespaces are the namespaces where the built-in policy only
// warns and the webhook fails open by default: if the network breaks, the fix
// to kube-proxy's or the CNI's DaemonSet must land whatever dsguard thinks of
// it. Only kube-system: it always exists, so nobody can create it, whereas a
// well-known CNI namespace (calico-system, kube-flannel, ...) that does not
// exist could be created by anyone allowed to create namespaces, who would
// then escape every deny in it. The chart adds those that exist at install
// (webhook.failOpenIfPresent); others are named by the operator.
var InfrastructureNamespaces = []string{"kube-system"}

// NamespaceEnforcementConfig caps actions in the namespaces matching Namespaces.
type NamespaceEnforcementConfig struct {
	Namespaces  []string    `yaml:"namespaces"`
	Enforcement Enforcement `yaml:"enforcement"`
}

// BypassConfig lists the break-glass identities.
type BypassConfig struct {
	Users  []string `yaml:"users"`
	Groups []string `yaml:"groups"`
}

// RuleConfig is the per-rule part of the policy, with the rule's own typed
// parameters.
type RuleConfig[P any] struct {
	RuleOptions `yaml:",inline"`
	Parameters  P `yaml:"parameters"`
}

// RuleOptions are the settings every rule has.
type RuleOptions struct {
	Action Action      `yaml:"action"`
	Scope  ScopeConfig `yaml:"scope"`
	// AllowExemptions, when false, makes dsguard ignore exemption annotations
	// for this rule (and report them).
	AllowExemptions *bool `yaml:"allowExemptions"`
	// Delegated marks a rule that is enforced outside this policy (by the
	// generated ValidatingAdmissionPolicies in vap+webhook mode): it is
	// compiled as off, while Weaknesses still judges its configured action,
	// so handing a rule to the API server is not reported as lowering it.
	// Never read from YAML.
	Delegated bool `yaml:"-"`
}

// ScopeConfig limits where a rule applies.
type ScopeConfig struct {
	Namespaces NamespaceScopeConfig `yaml:"namespaces"`
	Selector   *LabelSelectorConfig `yaml:"selector"`
}

// NamespaceScopeConfig holds namespace globs (path.Match syntax). An empty
// include list means every namespace.
type NamespaceScopeConfig struct {
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
}

// LabelSelectorConfig mirrors metav1.LabelSelector with yaml tags.
type LabelSelectorConfig struct {
	MatchLabels      map[string]string                `yaml:"matchLabels"`
	MatchExpressions []LabelSelectorRequirementConfig `yaml:"matchExpressions"`
}

// LabelSelectorRequirementConfig mirrors metav1.LabelSelectorRequirement.
type LabelSelectorRequirementConfig struct {
	Key      string   `yaml:"key"`
	Operator string   `yaml:"operator"`
	Values   []string `yaml:"values"`
}

// NoParams is the parameter type of rules without parameters; any key under
// "parameters" is then an error.
type NoParams struct{}

// RulesConfig holds each rule's part of the policy, keyed by rule ID, each
// typed with the rule's own parameters: the registry that made it decides
// which keys exist and how each is decoded.
type RulesConfig struct {
	reg  *Registry
	byID map[string]ruleConfig
}

// ruleConfig is what the compiler needs from any RuleConfig[P].
type ruleConfig interface {
	options() *RuleOptions
	params() any
}

func (c *RuleConfig[P]) options() *RuleOptions { return &c.RuleOptions }
func (c *RuleConfig[P]) params() any           { return &c.Parameters }

// Options returns the settings of rule id, or nil for a rule the policy's
// registry does not have.
func (rc *RulesConfig) Options(id string) *RuleOptions {
	if c, ok := rc.byID[id]; ok {
		return c.options()
	}
	return nil
}

// IDs returns the IDs of the rules configured, in catalogue order.
func (rc *RulesConfig) IDs() []string {
	ids := make([]string, 0, len(rc.rules()))
	for _, r := range rc.rules() {
		ids = append(ids, r.ID)
	}
	return ids
}

// Params returns the parameters of rule id, a pointer to the rule's own
// parameter type; nil for a rule the config does not have.
func (rc *RulesConfig) Params(id string) any {
	if c, ok := rc.byID[id]; ok {
		return c.params()
	}
	return nil
}

// RuleConfigOf returns the part of c for rule id, typed with the rule's
// parameters; nil when there is no such rule or P is not its parameter type.
func RuleConfigOf[P any](c *Config, id string) *RuleConfig[P] {
	rc, _ := c.Rules.byID[id].(*RuleConfig[P])
	return rc
}

// rules returns the registry's rules that the config holds, in catalogue order.
func (rc *RulesConfig) rules() []*Rule {
	if rc.reg == nil {
		return nil
	}
	return rc.reg.rules
}

// UnmarshalYAML decodes the "rules" mapping with each rule's own types, over
// the values already there (the defaults). It takes yaml's older function
// form on purpose: that one decodes with the document's decoder, so unknown
// keys stay errors and problems keep their lines. A struct type is made with
// one field per rule, keyed by rule ID, so an unknown rule ID is an unknown
// field like any other.
func (rc *RulesConfig) UnmarshalYAML(unmarshal func(any) error) error {
	v := rc.asStruct()
	err := unmarshal(v.Addr().Interface())
	for i, r := range rc.rules() {
		reflect.ValueOf(rc.byID[r.ID]).Elem().Set(v.Field(i))
	}
	return err
}

// MarshalYAML writes the rules in catalogue order, keyed by rule ID.
func (rc RulesConfig) MarshalYAML() (any, error) { return rc.asStruct().Interface(), nil }

// asStruct copies the rules' parts into a struct value with one field per
// rule, tagged with its ID, in catalogue order.
func (rc *RulesConfig) asStruct() reflect.Value {
	rules := rc.rules()
	fields := make([]reflect.StructField, len(rules))
	for i, r := range rules {
		fields[i] = reflect.StructField{
			Name: "R" + strconv.Itoa(i),
			Type: reflect.TypeOf(rc.byID[r.ID]).Elem(),
			Tag:  reflect.StructTag(`yaml:"` + r.ID + `"`),
		}
	}
	v := reflect.New(reflect.StructOf(fields)).Elem()
	for i, r := range rules {
		v.Field(i).Set(reflect.ValueOf(rc.byID[r.ID]).Elem())
	}
	return v
}

// DefaultConfig returns the built-in policy of the registry's rules: what
// dsguard enforces with no configuration at all, and what every absent key in
// a document falls back to.
func (reg *Registry) DefaultConfig() *Config {
	yes := true
	c := &Config{
		APIVersion:  ConfigAPIVersion,
		Kind:        ConfigKind,
		Enforcement: EnforcementEnforce,
		// The infrastructure namespaces hold the CNI, kube-proxy and CSI node
		// plugins: a policy mistake must never block their upgrades, so deny
		// becomes warn there.
		NamespaceEnforcement: []NamespaceEnforcementConfig{
			{Namespaces: slices.Clone(InfrastructureNamespaces), Enforcement: EnforcementWarn},
		},
		Ratcheting: &yes,
		Exemptions: ExemptionsConfig{MaxExemptionDays: DefaultMaxExemptionDays},
		Rules:      RulesConfig{reg: reg, byID: make(map[string]ruleConfig, len(reg.rules))},
	}
	for _, r := range reg.rules {
		c.Rules.byID[r.ID] = r.newConfig()
	}
	return c
}

// ConfigError reports everything wrong with a policy document at once.
type ConfigError struct {
	// Problems are one line each, prefixed with the document line when known.
	Problems []ConfigProblem
}

// ConfigProblem is one thing wrong with a policy document.
type ConfigProblem struct {
	Line    int    // 0 when unknown
	Field   string // field path, "" when unknown
	Message string
}

// String is the problem on one line: "line N: field: message".
func (p ConfigProblem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error lists every problem on one line.
func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "invalid policy: " + strings.Join(lines, "; ")
}

// ParseConfig decodes a policy document strictly (an unknown or misspelt key
// is an error with its line) over the built-in defaults of the registry's
// rules, then validates it, collecting every problem with its field path and
// line.
func (reg *Registry) ParseConfig(data []byte) (*Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &ConfigError{Problems: []ConfigProblem{{Message: "the policy document is empty"}}}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &ConfigError{Problems: yamlProblems(err)}
	}
	// Only comments, a bare "---" or "null": as empty as no bytes at all (a
	// template that rendered nothing), and not a request for the defaults.
	if isEmptyDocument(&root) {
		return nil, &ConfigError{Problems: []ConfigProblem{{Message: "the policy document is empty"}}}
	}
	cfg := reg.DefaultConfig()
	// Everything else falls back to the defaults, but the document must say
	// what it is: apiVersion and kind are required, not defaulted.
	cfg.APIVersion, cfg.Kind = "", ""
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		return nil, &ConfigError{Problems: yamlProblems(err)}
	}
	// Further documents are an error unless empty (a trailing "---").
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || !isEmptyDocument(&extra) {
			return nil, &ConfigError{Problems: []ConfigProblem{{Line: extra.Line,
				Message: "more than one YAML document: a policy is exactly one PolicyConfig"}}}
		}
	}
	if errs := ValidateConfig(cfg); len(errs) > 0 {
		problems := make([]ConfigProblem, 0, len(errs))
		for _, e := range errs {
			problems = append(problems, ConfigProblem{
				Line:    lineOf(&root, e.Field),
				Field:   e.Field,
				Message: e.ErrorBody(),
			})
		}
		return nil, &ConfigError{Problems: problems}
	}
	return cfg, nil
}

// isEmptyDocument reports whether a parsed document holds no value.
func isEmptyDocument(root *yaml.Node) bool {
	n := root
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return true
		}
		n = n.Content[0]
	}
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// yaml.v3 names Go types in its messages ("field x not found in type
// policy.MaxUnavailableParams"); the person fixing a ConfigMap needs the key.
var (
	yamlLinePrefix = regexp.MustCompile(`(?s)^(?:yaml: )?line (\d+): (.*)$`)
	// The rules mapping is decoded into a struct type made at run time, whose
	// name is "struct { ... }".
	yamlUnknownField = regexp.MustCompile(`(?s)^field (.*?) not found in type (?:struct \{.*\}|\S+)$`)
	// The Go type ends the message: "into policy.Enforcement",
	// "into []policy.TaintConfig", "into policy.RuleConfig[github.com/...]".
	yamlGoType = regexp.MustCompile(`(?s) into (?:struct \{.*\}|(?:\[\]|\*|map\[[^\] ]*\])*[A-Za-z0-9_]+\.\S*)$`)
)

func yamlProblems(err error) []ConfigProblem {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	out := make([]ConfigProblem, 0, len(msgs))
	for _, m := range msgs {
		p := ConfigProblem{Message: strings.TrimPrefix(strings.TrimSpace(m), "yaml: ")}
		if g := yamlLinePrefix.FindStringSubmatch(p.Message); g != nil {
			p.Line, _ = strconv.Atoi(g[1])
			p.Message = g[2]
		}
		if g := yamlUnknownField.FindStringSubmatch(p.Message); g != nil {
			p.Message = fmt.Sprintf("unknown field %q", g[1])
		}
		p.Message = yamlGoType.ReplaceAllString(p.Message, " into the expected type")
		// A problem is one line (keys and values may hold line breaks).
		p.Message = strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(p.Message)
		out = append(out, p)
	}
	return out
}

// lineOf finds the line of a field path ("rules.max-unavailable.action",
// "x.y[2]", "m[key.with.dots]") in a decoded document, or 0.
func lineOf(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, step := range splitFieldPath(path) {
		next := childNode(n, step)
		if next == nil {
			return line
		}
		n = next
		line = n.Line
	}
	return line
}

func childNode(n *yaml.Node, step string) *yaml.Node {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == step {
				return n.Content[i+1]
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(step); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}

// splitFieldPath splits a field.Path string into its steps.
func splitFieldPath(p string) []string {
	var steps []string
	for len(p) > 0 {
		switch p[0] {
		case '.':
			p = p[1:]
		case '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return append(steps, p[1:])
			}
			steps = append(steps, p[1:end])
			p = p[end+1:]
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			steps = append(steps, p[:end])
			p = p[end:]
		}
	}
	return steps
}
