package policy

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
)

const readinessProbeID = "readiness-probe"

var readinessProbeRule = newRule(Rule{
	ID:    readinessProbeID,
	Title: "Every container has a readiness probe",
	Why: "numberReady is how a DaemonSet reports coverage, and a rolling update waits for readiness " +
		"before moving on. Without a readiness probe a container is ready the moment it starts, so " +
		"numberReady only means \"started\" and a rollout races through nodes whose agent does not work.",
	Remediation:   "Add a readinessProbe to every container (an HTTP health endpoint, a TCP port or an exec check).",
	DefaultAction: ActionWarn,
	Exemptible:    true,
}, checkReadinessProbe)

func checkReadinessProbe(ds *appsv1.DaemonSet, _ *Env, _ *NoParams) []Finding {
	var out []Finding
	for i := range ds.Spec.Template.Spec.Containers {
		c := &ds.Spec.Template.Spec.Containers[i]
		if c.ReadinessProbe != nil {
			continue
		}
		out = append(out, Finding{
			Field: podSpecPath.Child("containers").Index(i).Child("readinessProbe"),
			Message: fmt.Sprintf("container %q has no readinessProbe: numberReady counts it ready as soon as "+
				"it starts, so a broken agent still looks covered", c.Name),
			Remediation: fmt.Sprintf("add a readinessProbe to container %q.", c.Name),
		})
	}
	return out
}
