package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Weakness is one way a policy is weaker than the built-in baseline.
type Weakness struct {
	// Reason is a stable label: enforcement, bypass-broad-group,
	// bypass-anonymous, deny-rule-lowered, namespace-lowered,
	// exemptions-unbounded.
	Reason string
	// Detail says what exactly, for a person.
	Detail string
}

// WeaknessReasons are all reasons Weaknesses reports, for metrics.
var WeaknessReasons = []string{"enforcement", "bypass-broad-group", "bypass-anonymous", "deny-rule-lowered",
	"namespace-lowered", "exemptions-unbounded"}

// broadGroups are groups every user, or every workload, belongs to: a bypass
// for one of them switches dsguard off for nearly everybody.
var broadGroups = []string{"system:authenticated", "system:unauthenticated", "system:serviceaccounts"}

// maxReasonableExemptionDays is the longest exemption the baseline
// considers normal.
const maxReasonableExemptionDays = 365

// Weaknesses lists how p is weaker than the built-in policy: a lowered
// enforcement, a bypass for broad groups or anonymous users, a deny rule
// lowered, a namespace ceiling that matches every namespace, exemptions that
// may last more than a year. A weaker policy may be intended (a staged
// roll-out); dsguard admits it but says so wherever an operator looks.
func (p *Policy) Weaknesses() []Weakness {
	var out []Weakness
	if p.enforcement != EnforcementEnforce {
		out = append(out, Weakness{"enforcement", fmt.Sprintf("enforcement is %s: no DaemonSet is denied anywhere", p.enforcement)})
	}
	for _, g := range p.bypassGroups {
		if isBroadGroup(g) {
			out = append(out, Weakness{"bypass-broad-group", fmt.Sprintf("bypass.groups has %s: its members are never checked", g)})
		}
	}
	for _, u := range p.bypassUsers {
		if u == "system:anonymous" {
			out = append(out, Weakness{"bypass-anonymous", "bypass.users has system:anonymous"})
		}
	}
	var lowered []string
	for i := range p.rules {
		rs := &p.rules[i]
		if rs.rule.DefaultAction == ActionDeny && rs.configured != ActionDeny {
			lowered = append(lowered, rs.rule.ID+" is "+string(rs.configured))
		}
	}
	if len(lowered) > 0 {
		out = append(out, Weakness{"deny-rule-lowered", "deny rules lowered: " + strings.Join(lowered, ", ")})
	}
	for _, ne := range p.namespaceEnforcement {
		if ne.ceiling != ActionDeny && matchesEveryNamespace(ne.globs) {
			out = append(out, Weakness{"namespace-lowered", fmt.Sprintf("namespaceEnforcement %s caps every namespace at %s",
				strings.Join(ne.globs, ", "), ne.ceiling)})
			break
		}
	}
	if p.exemptions.MaxExemptionDays > maxReasonableExemptionDays {
		out = append(out, Weakness{"exemptions-unbounded", fmt.Sprintf("exemptions.maxExemptionDays is %d: exemptions from deny rules may last years",
			p.exemptions.MaxExemptionDays)})
	}
	return out
}

func isBroadGroup(g string) bool {
	// Or every service account of a namespace.
	return slices.Contains(broadGroups, g) || strings.HasPrefix(g, "system:serviceaccounts:")
}

// matchesEveryNamespace reports whether globs match any namespace name: a
// glob that matches names no namespace shares.
func matchesEveryNamespace(globs []string) bool {
	for _, g := range globs {
		a, _ := path.Match(g, "a")
		b, _ := path.Match(g, "zz-9")
		if a && b {
			return true
		}
	}
	return false
}
