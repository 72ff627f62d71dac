package vap

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// The rule IDs this package renders, in catalogue order.
const (
	controlPlaneToleration = "control-plane-toleration"
	surgeHostPort          = "surge-host-port"
	maxUnavailable         = "max-unavailable"
	readinessProbe         = "readiness-probe"
	hostPathReadOnly       = "host-path-read-only"
	privileged             = "privileged"
	imagePinned            = "image-pinned"
	updateStrategy         = "update-strategy"
	invalidAnnotation      = "invalid-annotation"
)

// containerLists are the pod spec's container lists, as the webhook walks them.
var containerLists = []string{"initContainers", "containers"}

// runsAlongside is a CEL condition on a container of list: it runs for the
// Pod's whole life (every regular container and every native sidecar).
func runsAlongside(list, c string) string {
	if list == "containers" {
		return "true"
	}
	return fmt.Sprintf("(has(%[1]s.restartPolicy) && %[1]s.restartPolicy == 'Always')", c)
}

// noun is a CEL string naming a container of list for a message.
func noun(list, c string) string {
	if list == "containers" {
		return "'container'"
	}
	return fmt.Sprintf("(%s ? 'sidecar' : 'init container')", runsAlongside(list, c))
}

// containerCheck is a per-container check with a message naming the first
// offending container; text and fix render parts of the message from the
// container expression. The list is walked once for the message: the first
// offending index is bound with a one-element list (CEL has no let), so the
// container expression is a plain index, however often the message uses it.
func containerCheck(rule, list, field string, pred func(c, o string) string, text func(c string) string, fix func(c string) string) check {
	l := podSpec("object") + "." + list
	const c = "c"
	body := strings.Join([]string{
		lit("[" + rule + "] spec.template.spec." + list + "["), "string(i)", lit("]" + field + ": "),
		noun(list, c), `' "' + ` + c + `.name + '" '`, text(c), "'; fix: '", fix(c),
	}, " + ")
	msg := fmt.Sprintf("[%[1]s.transformList(i, x, %[2]s, i)[0]].map(i, [%[1]s[i]].map(c, %[3]s)[0])[0]", l, pred("x", "object"), body)
	return perItem(policy.ActionDeny, []string{"spec.template.spec." + list}, pred, msg)
}

// checksFor returns the CEL checks of one rule under the policy document.
func checksFor(id string, cfg *policy.Config, today string) []check {
	switch id {
	case controlPlaneToleration:
		return controlPlaneTolerationChecks(params[rules.ControlPlaneTolerationParams](cfg, id))
	case surgeHostPort:
		return surgeHostPortChecks()
	case maxUnavailable:
		return maxUnavailableChecks(params[rules.MaxUnavailableParams](cfg, id))
	case readinessProbe:
		var out []check
		for _, l := range containerLists {
			out = append(out, containerCheck(id, l, ".readinessProbe",
				func(c, _ string) string {
					return fmt.Sprintf("(%s && !has(%s.readinessProbe))", runsAlongside(l, c), c)
				},
				func(string) string { return `'has no readinessProbe: numberReady only means "started"'` },
				func(c string) string {
					return "'add a readinessProbe to ' + " + noun(l, c) + " + ' \"' + " + c + ".name + '\".'"
				}))
		}
		return out
	case hostPathReadOnly:
		return hostPathChecks(params[rules.HostPathReadOnlyParams](cfg, id))
	case privileged:
		var out []check
		for _, l := range containerLists {
			out = append(out, containerCheck(id, l, ".securityContext.privileged",
				func(c, _ string) string {
					return fmt.Sprintf("(has(%[1]s.securityContext) && has(%[1]s.securityContext.privileged) && %[1]s.securityContext.privileged)", c)
				},
				func(string) string { return "'runs privileged on every node it covers'" },
				func(c string) string {
					return "'drop privileged from ' + " + noun(l, c) + " + ' \"' + " + c + ".name + '\" and grant only the capabilities it needs.'"
				}))
		}
		return out
	case imagePinned:
		return imagePinnedChecks(params[rules.ImagePinnedParams](cfg, id).RequireDigest)
	case updateStrategy:
		onDelete := func(o string) string {
			return fmt.Sprintf("(has(%[1]s.spec.updateStrategy) && has(%[1]s.spec.updateStrategy.type) && %[1]s.spec.updateStrategy.type == 'OnDelete')", o)
		}
		return []check{wholeObject(policy.ActionDeny, onDelete,
			lit("[update-strategy] spec.updateStrategy.type: updateStrategy OnDelete: a change reaches a node only when its Pod is deleted by hand; fix: set spec.updateStrategy.type: RollingUpdate with maxUnavailable: 1."))}
	case invalidAnnotation:
		return invalidAnnotationChecks(cfg, today)
	}
	return nil
}

func controlPlaneTolerationChecks(p *rules.ControlPlaneTolerationParams) []check {
	type taintCEL struct {
		// text is the taint as the message names it, hint its toleration.
		text, hint string
		untolered  func(o string) string
	}
	var taints []taintCEL
	var vars [][2]string
	for i, t := range p.Taints {
		taint := corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
		// The controller's own tolerations are fixed: judge them here.
		if coverage.ToleratedByDaemonPod(&corev1.PodSpec{}, &taint) {
			continue
		}
		byHostNetwork := coverage.ToleratedByDaemonPod(&corev1.PodSpec{HostNetwork: true}, &taint)
		// Where the placement aims is judged as the engine judges it
		// offline: against the model nodes that carry the taint, each
		// in a variable of its own, so that each stays under the
		// per-expression cost limit (docs/modes.md).
		var nodes []celNode
		for _, n := range coverage.ModelTaintedNodes(t.Key, t.Value) {
			nodes = append(nodes, newCELNode(n))
		}
		reachVar := func(o string, n int) string { return fmt.Sprintf("%sReachesTaint%dNode%d", o, i, n) }
		for _, o := range []string{"object", "oldObject"} {
			for j, n := range nodes {
				vars = append(vars, [2]string{reachVar(o, j), reachesNode(o, "variables."+validTermsVar(o), n)})
			}
		}
		taints = append(taints, taintCEL{text: t.String(), hint: fmt.Sprintf("{key: %s, operator: Exists, effect: %s}", t.Key, t.Effect), untolered: func(o string) string {
			s := podSpec(o)
			tolerated := fmt.Sprintf("(has(%[1]s.tolerations) && %[1]s.tolerations.exists(t, "+
				"(!has(t.effect) || t.effect == '' || t.effect == %[2]s) && "+
				"(!has(t.key) || t.key == '' || t.key == %[3]s) && "+
				"(has(t.operator) && t.operator == 'Exists' || "+
				"(!has(t.operator) || t.operator == '' || t.operator == 'Equal') && (has(t.value) ? t.value : '') == %[4]s)))",
				s, lit(string(t.Effect)), lit(t.Key), lit(t.Value))
			if byHostNetwork {
				tolerated = fmt.Sprintf("(%s || (has(%s.hostNetwork) && %s.hostNetwork))", tolerated, s, s)
			}
			// A placement too large to judge counts as aiming at the
			// tainted nodes, so that size is never a way out.
			aims := []string{"variables." + tooLargeVar(o)}
			for j := range nodes {
				aims = append(aims, "variables."+reachVar(o, j))
			}
			return fmt.Sprintf("(!%s && (%s))", tolerated, strings.Join(aims, " || "))
		}})
	}
	if len(taints) == 0 {
		return nil
	}
	// Variables may read only those before them.
	var first [][2]string
	for _, o := range []string{"object", "oldObject"} {
		first = append(first, [2]string{tooLargeVar(o), placementTooLarge(o)}, [2]string{validTermsVar(o), validTerms(o)})
	}
	vars = append(first, vars...)
	violated := func(o string) string {
		var any []string
		for _, t := range taints {
			any = append(any, t.untolered(o))
		}
		// The intended-coverage annotation never lowers this rule.
		return "(" + strings.Join(any, " || ") + ")"
	}
	// The missing taints and their tolerations, bound once (see
	// containerCheck), so that each taint is judged once for the message.
	var missing []string
	for _, t := range taints {
		missing = append(missing, fmt.Sprintf("(%s ? [[%s, %s]] : [])", t.untolered("object"), lit(t.text), lit(t.hint)))
	}
	msg := fmt.Sprintf("[%s].map(m, '[control-plane-toleration] spec.template.spec.tolerations: no toleration for ' + m.map(t, t[0]).join(', ') + "+
		"': skips every node with that taint, unseen in desiredNumberScheduled; fix: add to spec.template.spec.tolerations: ' + m.map(t, t[1]).join(', '))[0]",
		strings.Join(missing, " + "))
	c := wholeObject(policy.ActionDeny, violated, msg)
	c.variables = vars
	return []check{c}
}

// tooLargeVar and validTermsVar name the variables that hold
// placementTooLarge and validTerms of o.
func tooLargeVar(o string) string   { return o + "PlacementTooLarge" }
func validTermsVar(o string) string { return o + "ValidTerms" }

// maxSurge and maxUnavailable as CEL: an int, or a percentage string. The
// API server has validated both before admission, so a string is "N%".
func rollingValue(o, name string) (present, positive, text string) {
	ru := o + ".spec.updateStrategy.rollingUpdate"
	v := ru + "." + name
	rolling := fmt.Sprintf("(!has(%[1]s.spec.updateStrategy) || !has(%[1]s.spec.updateStrategy.type) || %[1]s.spec.updateStrategy.type == 'RollingUpdate')", o)
	present = fmt.Sprintf("(%s && has(%s.spec.updateStrategy.rollingUpdate) && has(%s))", rolling, o, v)
	positive = fmt.Sprintf("(type(%[1]s) == int ? %[1]s > 0 : int(string(%[1]s).replace('%%', '')) > 0)", v)
	text = fmt.Sprintf("(type(%[1]s) == int ? string(%[1]s) : '\"' + string(%[1]s) + '\"')", v)
	return present, positive, text
}

func surgeHostPortChecks() []check {
	ports := func(o string) string {
		s := podSpec(o)
		var parts []string
		for _, l := range containerLists {
			parts = append(parts, fmt.Sprintf("(has(%[1]s.%[2]s) && %[1]s.%[2]s.exists(c, %[3]s && has(c.ports) && c.ports.exists(p, "+
				"(has(%[1]s.hostNetwork) && %[1]s.hostNetwork && has(p.containerPort) && p.containerPort > 0) || (has(p.hostPort) && p.hostPort > 0))))",
				s, l, runsAlongside(l, "c")))
		}
		return "(" + strings.Join(parts, " || ") + ")"
	}
	surges := func(o string) string {
		present, positive, _ := rollingValue(o, "maxSurge")
		return fmt.Sprintf("(%s && %s)", present, positive)
	}
	hostNetwork := func(o string) string {
		return fmt.Sprintf("(has(%[1]s.hostNetwork) && %[1]s.hostNetwork)", podSpec(o))
	}
	_, _, surge := rollingValue("object", "maxSurge")
	return []check{
		wholeObject(policy.ActionDeny,
			func(o string) string { return fmt.Sprintf("(%s && %s)", surges(o), ports(o)) },
			"'[surge-host-port] spec.updateStrategy.rollingUpdate.maxSurge: maxSurge ' + "+surge+" + ' with a hostPort (or a container port under hostNetwork): "+
				"the surge Pod needs a port the old Pod holds and stays Pending; fix: set maxSurge: 0 and maxUnavailable: 1 (or a small percentage); the old Pod then stops before the new one binds.'"),
		wholeObject(policy.ActionWarn,
			func(o string) string { return fmt.Sprintf("(%s && %s && !%s)", surges(o), hostNetwork(o), ports(o)) },
			"'[surge-host-port] spec.updateStrategy.rollingUpdate.maxSurge: maxSurge ' + "+surge+" + ' with hostNetwork: the new Pod cannot bind a port the old one holds; "+
				"fix: set maxSurge: 0 and maxUnavailable: 1 unless the agent binds no port at all.'"),
	}
}

func maxUnavailableChecks(p *rules.MaxUnavailableParams) []check {
	var out []check
	v := func(o string) string { return o + ".spec.updateStrategy.rollingUpdate.maxUnavailable" }
	percent := func(o string) string {
		present, _, _ := rollingValue(o, "maxUnavailable")
		return fmt.Sprintf("(%s && type(%s) == string && int(string(%s).replace('%%', '')) > %d)", present, v(o), v(o), p.MaxPercent)
	}
	out = append(out, wholeObject(policy.ActionDeny, percent, fmt.Sprintf(
		"'[max-unavailable] spec.updateStrategy.rollingUpdate.maxUnavailable: maxUnavailable ' + string(%[1]s) + ' is above the %[2]d%% cap: a rollout may blind ' + string(%[1]s) + ' of the nodes at once; "+
			"fix: set maxUnavailable to at most \"%[2]d%%\" or to a small number such as 1.'", v("object"), p.MaxPercent)))
	if p.MaxCount > 0 {
		count := func(o string) string {
			present, _, _ := rollingValue(o, "maxUnavailable")
			return fmt.Sprintf("(%s && type(%s) == int && %s > %d)", present, v(o), v(o), p.MaxCount)
		}
		out = append(out, wholeObject(policy.ActionDeny, count, fmt.Sprintf(
			"'[max-unavailable] spec.updateStrategy.rollingUpdate.maxUnavailable: maxUnavailable ' + string(%[1]s) + ' is above the cap of %[2]d: a rollout may blind ' + string(%[1]s) + ' nodes at once; "+
				"fix: set maxUnavailable to at most %[2]d.'", v("object"), p.MaxCount)))
	}
	// Both findings sit at the same field: ratchet them as one.
	if len(out) == 2 {
		a, b := out[0], out[1]
		both := func(o string) string { return fmt.Sprintf("(%s || %s)", a.violated(o), b.violated(o)) }
		merged := wholeObject(policy.ActionDeny, both, fmt.Sprintf("(%s ? %s : %s)", a.violated("object"), a.message, b.message))
		out = []check{merged}
	}
	return out
}

func hostPathChecks(p *rules.HostPathReadOnlyParams) []check {
	allowed := func(path string) string {
		var parts []string
		for _, d := range p.AllowWritable {
			d = strings.TrimSuffix(d, "/")
			if d == "" {
				return "true"
			}
			parts = append(parts, fmt.Sprintf("%[1]s == %[2]s || %[1]s == %[3]s || %[1]s.startsWith(%[3]s)", path, lit(d), lit(d+"/")))
		}
		if len(parts) == 0 {
			return "false"
		}
		return "(" + strings.Join(parts, " || ") + ")"
	}
	// The writable hostPath volumes as maps from name to path, built once
	// per object, so that judging a mount costs a few lookups, not a scan of
	// the volumes (quadratic in the object's size). A map entry costs about
	// 40 units to build; each map takes a slice of the volumes by index, so
	// that no single variable nears the per-expression limit on the largest
	// DaemonSet the API accepts.
	chunkVar := func(o string, i int) string { return fmt.Sprintf("%sWritableHostPaths%d", o, i) }
	var vars [][2]string
	for _, o := range []string{"object", "oldObject"} {
		s := podSpec(o)
		for i := range hostPathChunks {
			vars = append(vars, [2]string{chunkVar(o, i), fmt.Sprintf(
				"has(%[1]s.volumes) ? %[1]s.volumes.transformMapEntry(i, v, i >= %[2]d && i < %[3]d && has(v.hostPath) && !%[4]s, {v.name: v.hostPath.path}) : {}",
				s, i*hostPathChunk, (i+1)*hostPathChunk, allowed("v.hostPath.path"))})
		}
	}
	// lookup is the path of a writable hostPath volume named name, for messages.
	lookup := func(o, name string) string {
		expr := "''"
		for i := hostPathChunks - 1; i >= 0; i-- {
			expr = fmt.Sprintf("%[1]s in variables.%[2]s ? variables.%[2]s[%[1]s] : %[3]s", name, chunkVar(o, i), expr)
		}
		return "(" + expr + ")"
	}
	writableHostPath := func(m, o string) string {
		var in []string
		for i := range hostPathChunks {
			in = append(in, fmt.Sprintf("%s.name in variables.%s", m, chunkVar(o, i)))
		}
		return fmt.Sprintf("(!(has(%[1]s.readOnly) && %[1]s.readOnly) && (%[2]s))", m, strings.Join(in, " || "))
	}
	var out []check
	for _, l := range containerLists {
		list := "spec.template.spec." + l
		// The first offending container and mount, each bound once (see
		// containerCheck). The message reads only the first
		// hostPathMessageItems containers and mounts of each: judging a
		// mount costs up to eight lookups, and the message must stay under
		// the per-expression cost limit however many there are.
		body := fmt.Sprintf("'[host-path-read-only] %s[].volumeMounts[].readOnly: ' + %s + ' \"' + c.name + '\" mounts hostPath ' + %s + ' writable on every node it covers; fix: set readOnly: true on the \"' + m.name + '\" mount of ' + %s + ' \"' + c.name + '\".'",
			list, noun(l, "c"), truncated(lookup("object", "m.name"), 128), noun(l, "c"))
		beyond := fmt.Sprintf("'[host-path-read-only] %s[].volumeMounts[].readOnly: a container mounts a hostPath writable on every node it covers "+
			"(this message reads the first %d containers and their first %d mounts); fix: set readOnly: true on every hostPath mount outside the writable paths the policy allows.'",
			list, hostPathMessageItems, hostPathMessageItems)
		offends := fmt.Sprintf("j < %d && %s", hostPathMessageItems, writableHostPath("m", "object"))
		msg := fmt.Sprintf("[object.%[1]s.transformList(i, c, i < %[2]d && has(c.volumeMounts) && c.volumeMounts.exists(j, m, %[3]s), c)].map(cs, size(cs) == 0 ? %[4]s : "+
			"[cs[0]].map(c, [c.volumeMounts.transformList(j, m, %[3]s, m)[0]].map(m, %[5]s)[0])[0])[0]",
			list, hostPathMessageItems, offends, beyond, body)
		chk := perItem(policy.ActionDeny, []string{list, "volumeMounts"}, writableHostPath, msg)
		chk.variables = vars
		out = append(out, chk)
	}
	return out
}

// hostPathChunks maps of hostPathChunk volumes each cover more hostPath
// volumes than a 3 MiB request can hold (each takes at least 40 bytes).
const (
	hostPathChunk  = 12500
	hostPathChunks = 8
)

// hostPathMessageItems is how many containers, and mounts of each, the
// host-path-read-only message reads to name the first offender.
const hostPathMessageItems = 1000

func imagePinnedChecks(requireDigest bool) []check {
	// The tag follows the last ':' after the last '/'; a registry port
	// (registry:5000/img) is no tag.
	problem := func(c string) string {
		unpinned := fmt.Sprintf(`!%[1]s.image.matches(':[^/:]+$') || %[1]s.image.matches(':latest$')`, c)
		if requireDigest {
			unpinned = "true"
		}
		return fmt.Sprintf("(%[1]s.image != '' && !%[1]s.image.contains('@') && (%[2]s))", c, unpinned)
	}
	var out []check
	for _, l := range containerLists {
		out = append(out, containerCheck(imagePinned, l, ".image",
			func(c, _ string) string { return problem(c) },
			func(c string) string {
				// The tag is at the end: judge the last characters only.
				tail := truncated(c+".image", 128)
				return fmt.Sprintf(`'image "' + %[1]s + '" ' + (!%[1]s.matches(':[^/:]+$') ? 'has no tag (so :latest)' : %[1]s.matches(':latest$') ? 'uses :latest' : 'is pinned by tag, not digest') + ': nodes may run different builds'`, tail)
			},
			func(c string) string {
				return "'pin ' + " + noun(l, c) + " + ' \"' + " + c + ".name + '\" to a version tag or a digest.'"
			}))
	}
	return out
}

func invalidAnnotationChecks(cfg *policy.Config, today string) []check {
	var exemptible, denyRules []string
	for _, r := range rules.Builtin().Rules() {
		if r.Exemptible && exemptionsAllowed(cfg, r.ID) {
			exemptible = append(exemptible, r.ID)
		}
		if ruleAction(cfg, r.ID) == policy.ActionDeny {
			denyRules = append(denyRules, r.ID)
		}
	}
	todayTime, _ := time.Parse(time.DateOnly, today)
	const prefix = policy.ExemptionAnnotationPrefix
	annotations := func(o string) string { return o + ".metadata.annotations" }
	bad := func(o, k string) string {
		a := annotations(o)
		return fmt.Sprintf("(%[2]s == %[3]s ? !%[1]s[%[2]s].matches('\\\\S') : "+
			"%[2]s.startsWith(%[4]s) && !(%[2]s.substring(%[5]d) in %[6]s && %[7]s))",
			a, k, lit(policy.IntendedCoverageAnnotation), lit(prefix), len(prefix), litList(exemptible),
			exemptionValid(a+"["+k+"]", today, gateOf(cfg, todayTime, fmt.Sprintf("%s.substring(%d) in %s", k, len(prefix), litList(denyRules)))))
	}
	violated := func(o string) string {
		return fmt.Sprintf("(has(%[1]s) && %[1]s.exists(k, %[2]s))", annotations(o), bad(o, "k"))
	}
	introduced := fmt.Sprintf("(has(object.metadata.annotations) && object.metadata.annotations.exists(k, %s && "+
		"!(has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations && %s)))", bad("object", "k"), bad("oldObject", "k"))
	// The first bad key, bound once (see containerCheck).
	msg := fmt.Sprintf("[object.metadata.annotations.filter(k, %s)[0]].map(k, ", bad("object", "k")) + fmt.Sprintf("'[invalid-annotation] metadata.annotations[' + %[1]s + ']: ' + (%[1]s == %[2]s ? 'intended-coverage annotation has no reason, so it is ignored' : "+
		"'exemption is ignored: its rule is unknown, cannot be exempted or the policy forbids it, its reason is empty, its expiry is not a date YYYY-MM-DD, or it expired before %[3]s') + "+
		"'; fix: give the annotation a reason (\"<why>; expires=YYYY-MM-DD\"), renew or remove an expired exemption, and check the rule ID after exempt.dsguard.io/.')[0]",
		"k", lit(policy.IntendedCoverageAnnotation), today)
	return []check{{cap: policy.ActionDeny, violated: violated, introduced: introduced, message: msg}}
}
