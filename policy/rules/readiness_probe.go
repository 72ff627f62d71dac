package rules

import (
	"fmt"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
)

const readinessProbeID = "readiness-probe"

var readinessProbeRule = policy.NewRule(policy.Rule{
	ID:    readinessProbeID,
	Title: "Every container has a readiness probe",
	Why: "numberReady is how a DaemonSet reports coverage, and a rolling update waits for readiness " +
		"before moving on. Without a readiness probe a container is ready the moment it starts, so " +
		"numberReady only means \"started\" and a rollout races through nodes whose agent does not work.",
	Remediation:   "Add a readinessProbe to every container (an HTTP health endpoint, a TCP port or an exec check).",
	DefaultAction: policy.ActionWarn,
	Exemptible:    true,
	CEL:           readinessProbeCEL,
	CELGaps:       celform.Gaps(),
}, nil, checkReadinessProbe)

func checkReadinessProbe(ds *appsv1.DaemonSet, _ *policy.Env, _ *policy.NoParams) []policy.Finding {
	var out []policy.Finding
	for _, list := range containerLists {
		for i, c := range list.containers(&ds.Spec.Template.Spec) {
			// Plain init containers finish before the Pod can be ready;
			// sidecars' readiness counts toward the Pod's like a container's.
			if c.ReadinessProbe != nil || !list.runsAlongside(&c) {
				continue
			}
			out = append(out, policy.Finding{
				Field: list.fieldPath(i, fieldReadinessProbe),
				Message: sprintf("%s %q has no readinessProbe: numberReady only means \"started\"",
					list.noun(&c), c.Name),
				Remediation: sprintf("add a readinessProbe to %s %q.", list.noun(&c), c.Name),
			})
		}
	}
	return out
}

// readinessProbeCEL is the rule's CEL form.
func readinessProbeCEL(policy.CELInput) []policy.CELCheck {
	var out []policy.CELCheck
	for _, l := range celform.ContainerLists {
		out = append(out, celform.ContainerCheck(readinessProbeID, l, ".readinessProbe",
			func(c, _ string) string {
				return fmt.Sprintf("(%s && !has(%s.readinessProbe))", celform.RunsAlongside(l, c), c)
			},
			func(string) string { return `'has no readinessProbe: numberReady only means "started"'` },
			func(c string) string {
				return "'add a readinessProbe to ' + " + celform.Noun(l, c) + " + ' \"' + " + c + ".name + '\".'"
			}))
	}
	return out
}
