package rules

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
)

const surgeHostPortID = "surge-host-port"

var surgeHostPortRule = policy.NewRule(policy.Rule{
	ID:    surgeHostPortID,
	Title: "No maxSurge rollout for agents that bind host ports",
	Why: "With maxSurge the controller starts the new Pod on a node before the old one stops. " +
		"A hostPort (or a container port under hostNetwork) is already taken by the old Pod, so the " +
		"surge Pod stays Pending forever and the rollout wedges, node by node. Under hostNetwork with " +
		"no declared port the new Pod schedules, but its process cannot bind while the old one runs.",
	Remediation: "Set spec.updateStrategy.rollingUpdate.maxSurge to 0 and pace the rollout with maxUnavailable, " +
		"or stop binding host ports.",
	DefaultAction: policy.ActionDeny,
	Exemptible:    true,
	CEL:           surgeHostPortCEL,
	CELGaps:       celform.Gaps(),
}, nil, checkSurgeHostPort)

func checkSurgeHostPort(ds *appsv1.DaemonSet, _ *policy.Env, _ *policy.NoParams) []policy.Finding {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if !isRollingUpdate(ds) || ru == nil || ru.MaxSurge == nil {
		return nil
	}
	surges, err := resolvesAboveZero(ru.MaxSurge)
	if err != nil {
		return []policy.Finding{{Field: rollingUpdatePath.Child("maxSurge"), Message: fmt.Sprintf("maxSurge %s: %v", quoteIntOrString(ru.MaxSurge), err),
			Remediation: "set maxSurge to a non-negative integer or a percentage such as \"0\" or \"25%\"."}}
	}
	if !surges {
		return nil
	}
	spec := &ds.Spec.Template.Spec
	var ports []string
	for _, list := range containerLists {
		for _, c := range list.containers(spec) {
			for _, port := range c.Ports {
				// Only containers that run for the Pod's life hold a port
				// while the surge Pod starts: a plain init container of
				// the old Pod has exited, and the scheduler ignores its
				// hostPorts (scheduler util.GetHostPorts).
				if !list.runsAlongside(&c) {
					continue
				}
				switch {
				// Under hostNetwork every declared port is bound on the
				// node itself.
				case spec.HostNetwork && port.ContainerPort > 0:
					ports = append(ports, fmt.Sprintf("port %d under hostNetwork (%s %q)", port.ContainerPort, list.noun(&c), c.Name))
				case port.HostPort > 0:
					ports = append(ports, fmt.Sprintf("hostPort %d (%s %q)", port.HostPort, list.noun(&c), c.Name))
				}
			}
		}
	}
	surge := quoteIntOrString(ru.MaxSurge)
	surgePath := rollingUpdatePath.Child("maxSurge")
	switch {
	case len(ports) > 0:
		return []policy.Finding{{
			Field: surgePath,
			Message: fmt.Sprintf("maxSurge %s with %s: the surge Pod needs a port the old Pod holds and "+
				"stays Pending", surge, strings.Join(ports, ", ")),
			Remediation: "set maxSurge: 0 and maxUnavailable: 1 (or a small percentage); the old Pod then stops before the new one binds.",
		}}
	case spec.HostNetwork:
		return []policy.Finding{{
			Action:      policy.ActionWarn,
			Field:       surgePath,
			Message:     fmt.Sprintf("maxSurge %s with hostNetwork: the new Pod cannot bind a port the old one holds", surge),
			Remediation: "set maxSurge: 0 and maxUnavailable: 1 unless the agent binds no port at all.",
		}}
	}
	return nil
}

// resolvesAboveZero reports whether an int-or-percent resolves to more than
// zero Pods. Percentages of surge round up, so any positive percentage
// surges at least one Pod on any non-empty cluster.
func resolvesAboveZero(v *intstr.IntOrString) (bool, error) {
	n, _, err := parseIntOrPercent(v)
	return n > 0, err
}

// parseIntOrPercent returns the number and whether it is a percentage,
// rejecting what the API server rejects: negatives, percentages over 100 and
// strings that are not percentages.
func parseIntOrPercent(v *intstr.IntOrString) (int, bool, error) {
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return 0, false, fmt.Errorf("must not be negative")
		}
		return int(v.IntVal), false, nil
	}
	digits, ok := strings.CutSuffix(v.StrVal, "%")
	if !ok {
		return 0, false, fmt.Errorf("is neither an integer nor a percentage such as \"25%%\"")
	}
	// The API server accepts exactly ^[0-9]+%$, leading zeros included
	// ("05%" is 5%); a sign is not allowed, but "-5%" reads best as out of range.
	negative := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, true, fmt.Errorf("is not a whole-number percentage such as \"25%%\"")
	}
	n, err := strconv.Atoi(digits)
	if negative || err != nil || n > 100 {
		return 0, true, fmt.Errorf("must be between 0%% and 100%%")
	}
	return n, true, nil
}

func quoteIntOrString(v *intstr.IntOrString) string {
	if v.Type == intstr.Int {
		return fmt.Sprint(v.IntVal)
	}
	return fmt.Sprintf("%q", v.StrVal)
}

// surgeHostPortCEL is the rule's CEL form.
func surgeHostPortCEL(policy.CELInput) []policy.CELCheck {
	ports := func(o string) string {
		s := celform.PodSpec(o)
		var parts []string
		for _, l := range celform.ContainerLists {
			parts = append(parts, fmt.Sprintf("(has(%[1]s.%[2]s) && %[1]s.%[2]s.exists(c, %[3]s && has(c.ports) && c.ports.exists(p, "+
				"(has(%[1]s.hostNetwork) && %[1]s.hostNetwork && has(p.containerPort) && p.containerPort > 0) || (has(p.hostPort) && p.hostPort > 0))))",
				s, l, celform.RunsAlongside(l, "c")))
		}
		return "(" + strings.Join(parts, " || ") + ")"
	}
	surges := func(o string) string {
		present, positive, _ := celform.RollingValue(o, "maxSurge")
		return fmt.Sprintf("(%s && %s)", present, positive)
	}
	hostNetwork := func(o string) string {
		return fmt.Sprintf("(has(%[1]s.hostNetwork) && %[1]s.hostNetwork)", celform.PodSpec(o))
	}
	_, _, surge := celform.RollingValue("object", "maxSurge")
	return []policy.CELCheck{
		celform.WholeObject(policy.ActionDeny,
			func(o string) string { return fmt.Sprintf("(%s && %s)", surges(o), ports(o)) },
			"'[surge-host-port] spec.updateStrategy.rollingUpdate.maxSurge: maxSurge ' + "+surge+" + ' with a hostPort (or a container port under hostNetwork): "+
				"the surge Pod needs a port the old Pod holds and stays Pending; fix: set maxSurge: 0 and maxUnavailable: 1 (or a small percentage); the old Pod then stops before the new one binds.'"),
		celform.WholeObject(policy.ActionWarn,
			func(o string) string { return fmt.Sprintf("(%s && %s && !%s)", surges(o), hostNetwork(o), ports(o)) },
			"'[surge-host-port] spec.updateStrategy.rollingUpdate.maxSurge: maxSurge ' + "+surge+" + ' with hostNetwork: the new Pod cannot bind a port the old one holds; "+
				"fix: set maxSurge: 0 and maxUnavailable: 1 unless the agent binds no port at all.'"),
	}
}
