package rules

import (
	"fmt"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
)

const privilegedID = "privileged"

var privilegedRule = policy.NewRule(policy.Rule{
	ID:    privilegedID,
	Title: "Containers do not run privileged",
	Why: "A privileged container has full control of its node. A DaemonSet puts it on every node, so one " +
		"vulnerable image is a fleet-wide foothold; most agents need a few capabilities, not all of them.",
	Remediation: "Remove securityContext.privileged and add only the capabilities the agent needs " +
		"(for example NET_ADMIN or SYS_PTRACE).",
	DefaultAction: policy.ActionWarn,
	Exemptible:    true,
	CEL:           privilegedCEL,
	CELGaps:       celform.Gaps(),
}, nil, checkPrivileged)

func checkPrivileged(ds *appsv1.DaemonSet, _ *policy.Env, _ *policy.NoParams) []policy.Finding {
	var out []policy.Finding
	for _, list := range containerLists {
		for i, c := range list.containers(&ds.Spec.Template.Spec) {
			sc := c.SecurityContext
			if sc == nil || sc.Privileged == nil || !*sc.Privileged {
				continue
			}
			out = append(out, policy.Finding{
				Field:       list.fieldPath(i, fieldPrivileged),
				Message:     sprintf("%s %q runs privileged on every node it covers", list.noun(&c), c.Name),
				Remediation: sprintf("drop privileged from %s %q and grant only the capabilities it needs.", list.noun(&c), c.Name),
			})
		}
	}
	return out
}

// privilegedCEL is the rule's CEL form.
func privilegedCEL(policy.CELInput) []policy.CELCheck {
	var out []policy.CELCheck
	for _, l := range celform.ContainerLists {
		out = append(out, celform.ContainerCheck(privilegedID, l, ".securityContext.privileged",
			func(c, _ string) string {
				return fmt.Sprintf("(has(%[1]s.securityContext) && has(%[1]s.securityContext.privileged) && %[1]s.securityContext.privileged)", c)
			},
			func(string) string { return "'runs privileged on every node it covers'" },
			func(c string) string {
				return "'drop privileged from ' + " + celform.Noun(l, c) + " + ' \"' + " + c + ".name + '\" and grant only the capabilities it needs.'"
			}))
	}
	return out
}
