package policy

import "fmt"

// Action is what dsguard does with a finding.
type Action string

// The actions, from strongest to weakest. The order matters: whenever two
// settings disagree (the rule's action, the global enforcement, a namespace's
// enforcement, a finding that is softer by nature) the weaker one wins.
const (
	// ActionDeny rejects the request.
	ActionDeny Action = "deny"
	// ActionWarn admits the request and returns a warning to the client.
	ActionWarn Action = "warn"
	// ActionAudit admits silently and records the finding (audit annotations,
	// JSON output, the audit report).
	ActionAudit Action = "audit"
	// ActionOff disables the rule.
	ActionOff Action = "off"
)

// Actions lists the valid actions, strongest first.
var Actions = []Action{ActionDeny, ActionWarn, ActionAudit, ActionOff}

func (a Action) strength() int {
	switch a {
	case ActionDeny:
		return 3
	case ActionWarn:
		return 2
	case ActionAudit:
		return 1
	default:
		return 0
	}
}

// Valid reports whether a is one of the four actions.
func (a Action) Valid() bool {
	return a == ActionDeny || a == ActionWarn || a == ActionAudit || a == ActionOff
}

// Weaker returns the weaker of a and b. An empty action means "no cap".
func (a Action) Weaker(b Action) Action {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	if b.strength() < a.strength() {
		return b
	}
	return a
}

// Enforcement is the policy-wide (or per-namespace) ceiling on actions, for
// staged roll-outs: "warn" turns every deny into a warning, "audit" records
// everything and shows nothing.
type Enforcement string

// The enforcement levels.
const (
	EnforcementEnforce Enforcement = "enforce"
	EnforcementWarn    Enforcement = "warn"
	EnforcementAudit   Enforcement = "audit"
)

// Enforcements lists the valid enforcement levels.
var Enforcements = []Enforcement{EnforcementEnforce, EnforcementWarn, EnforcementAudit}

// ceiling is the strongest action an enforcement level lets through.
func (e Enforcement) ceiling() Action {
	switch e {
	case EnforcementWarn:
		return ActionWarn
	case EnforcementAudit:
		return ActionAudit
	default:
		return ActionDeny
	}
}

func (e Enforcement) valid() bool {
	return e == EnforcementEnforce || e == EnforcementWarn || e == EnforcementAudit
}

// String implements fmt.Stringer.
func (a Action) String() string { return string(a) }

// ActionNames returns the actions as strings, for field.NotSupported.
func ActionNames() []string { return stringsOf(Actions) }

func stringsOf[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

var _ fmt.Stringer = ActionDeny
