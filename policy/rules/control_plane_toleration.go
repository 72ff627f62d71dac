package rules

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
)

const controlPlaneTolerationID = "control-plane-toleration"

// ControlPlaneTolerationParams are the control-plane-toleration parameters.
type ControlPlaneTolerationParams struct {
	// Taints the pod template must tolerate.
	Taints []TaintConfig `yaml:"taints"`
}

// TaintConfig is a taint the DaemonSet must tolerate.
type TaintConfig struct {
	Key    string             `yaml:"key"`
	Value  string             `yaml:"value"`
	Effect corev1.TaintEffect `yaml:"effect"`
}

// String is the taint as kubectl writes it: key[=value]:effect.
func (t TaintConfig) String() string { return taintList([]TaintConfig{t}) }

// taintList writes taints as String does, separated by commas, in one
// allocation (corev1.Taint's ToString is one fmt.Sprintf per taint).
func taintList(taints []TaintConfig) string {
	n := 0
	for _, t := range taints {
		n += len(t.Key) + len("=") + len(t.Value) + len(":") + len(t.Effect) + len(", ")
	}
	var b strings.Builder
	b.Grow(n)
	for i, t := range taints {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.Key)
		if t.Value != "" {
			b.WriteByte('=')
			b.WriteString(t.Value)
		}
		if t.Value != "" || t.Effect != "" {
			b.WriteByte(':')
			b.WriteString(string(t.Effect))
		}
	}
	return b.String()
}

// taint is the configured taint as a Kubernetes taint; an empty value
// matches every value of the key (see policy.MatchesAnyTaint).
func (t TaintConfig) taint() corev1.Taint {
	return corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
}

func defaultControlPlaneTolerationParams() ControlPlaneTolerationParams {
	return ControlPlaneTolerationParams{Taints: []TaintConfig{
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
	}}
}

// Weaknesses implements policy.ParamWeakener: with no taint to tolerate,
// the rule checks nothing and never denies.
func (p *ControlPlaneTolerationParams) Weaknesses() []string {
	if len(p.Taints) == 0 {
		return []string{"taints is empty: no DaemonSet is ever asked to tolerate the control-plane taint"}
	}
	return nil
}

// Loosened implements policy.ParamLoosener: a taint dropped from the list
// is one a DaemonSet no longer has to tolerate, so the nodes that carry it
// may go without the agent unnoticed. An empty list is said by Weaknesses.
func (p *ControlPlaneTolerationParams) Loosened(old any) []string {
	o, ok := old.(*ControlPlaneTolerationParams)
	if !ok || len(p.Taints) == 0 {
		return nil
	}
	var out []string
	for _, t := range o.Taints {
		if !slices.Contains(p.Taints, t) {
			out = append(out, "taints drops "+t.String()+": DaemonSets no longer have to tolerate it, so nodes with it may go without the agent")
		}
	}
	return out
}

// Validate implements policy.ParamValidator.
func (p *ControlPlaneTolerationParams) Validate(fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range p.Taints {
		tp := fp.Child("taints").Index(i)
		if t.Key == "" {
			errs = append(errs, field.Required(tp.Child("key"), "the taint key"))
		} else {
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
			}
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute:
		case corev1.TaintEffectPreferNoSchedule:
			errs = append(errs, field.Invalid(tp.Child("effect"), t.Effect,
				"PreferNoSchedule never keeps a DaemonSet off a node, so requiring a toleration for it has no effect"))
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, []string{"NoSchedule", "NoExecute"}))
		}
	}
	return errs
}

var controlPlaneTolerationRule = policy.WithReportedTaints(policy.NewRule(policy.Rule{
	ID:    controlPlaneTolerationID,
	Title: "Pod template tolerates the control-plane taints",
	Why: "A DaemonSet skips every node whose NoSchedule or NoExecute taint it does not tolerate. " +
		"Without a toleration for node-role.kubernetes.io/control-plane:NoSchedule a node agent " +
		"(log shipper, node-exporter, security sensor) never runs on the control-plane nodes, and " +
		"desiredNumberScheduled silently excludes them, so counter-based alerts stay green. " +
		"A DaemonSet whose placement genuinely excludes the tainted nodes is left alone: its nodeName, " +
		"nodeSelector and required node affinity must select none of them. With live nodes that is judged " +
		"against the nodes that carry the taint; offline, or when no node carries it, against model " +
		"control-plane nodes (labels node-role.kubernetes.io/control-plane: \"\", kubernetes.io/os: linux, " +
		"kubernetes.io/arch amd64 and arm64, a hostname, and the taint's key with its value). So a " +
		"Windows-only DaemonSet is left alone, while NotIn [fargate], DoesNotExist of an unrelated label " +
		"or kubernetes.io/hostname Exists select those nodes and do not silence the rule. The " +
		"coverage.dsguard.io/intended annotation does not lower this rule; only an expiring exemption does.",
	Remediation: "Add a toleration for each listed taint to spec.template.spec.tolerations " +
		"(for example {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}); " +
		"if the DaemonSet must not run there, exclude those nodes in its required node affinity " +
		"(node-role.kubernetes.io/control-plane DoesNotExist) or add an exemption with an expiry.",
	DefaultAction: policy.ActionDeny,
	Exemptible:    true,
	Params: []policy.ParamDoc{{
		Name: "taints", Type: "list of {key, value, effect}",
		Default:     "[{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]",
		Description: "Taints every DaemonSet must tolerate. Effect is NoSchedule or NoExecute.",
	}},
	CEL:     controlPlaneTolerationCEL,
	CELGaps: celform.Gaps("a placement (nodeName, nodeSelector, required node affinity) is judged against the model nodes that carry the taint, as the webhook judges it offline, not against the live ones: so no node names in the message, no softening to a warning when no node carries the taint (a managed control plane), and where the live tainted nodes differ from the model (a label the model lacks, one architecture only) the two can judge a placement differently; in vap+webhook mode the webhook keeps judging this rule against the live nodes"),
}, defaultControlPlaneTolerationParams, checkControlPlaneToleration), reportedTaints)

func checkControlPlaneToleration(ds *appsv1.DaemonSet, env *policy.Env, p *ControlPlaneTolerationParams) []policy.Finding {
	// A policy names a taint or two: they fit on the stack.
	var buf [4]TaintConfig
	untolerated := untoleratedTaints(buf[:0], &ds.Spec.Template.Spec, p)
	aimed := untolerated[:0]
	for _, t := range untolerated {
		if aimsAt(ds, t, env) {
			aimed = append(aimed, t)
		}
	}
	if len(aimed) == 0 {
		return nil
	}
	present := env.Nodes == nil // offline, assume the taints exist
	for _, t := range aimed {
		present = present || env.Nodes.HasTaint(t.Key, t.Value, t.Effect)
	}
	f := policy.Finding{
		Field:       tolerationsPath,
		Remediation: tolerationHint(aimed),
	}
	if !present {
		// A managed control plane has no such nodes: nothing is skipped
		// today, so this is advice, never a deny.
		f.Action = policy.ActionWarn
		f.Message = sprintf("no toleration for %s: no node carries it today, but such nodes would be skipped",
			taintList(aimed))
		return []policy.Finding{f}
	}
	skips := "skips every node with that taint"
	if cov := env.Coverage(ds); cov != nil {
		if names, n := nodesSkippedFor(cov, aimed, nodesNamed); n > 0 {
			skips = "skips " + env.DescribeNodes(names, n, nodesNamed) + " (" + ofNodes(n, cov.Total) + ")"
		}
	}
	f.Message = sprintf("no toleration for %s: %s, unseen in desiredNumberScheduled", taintList(aimed), skips)
	return []policy.Finding{f}
}

// untoleratedTaints appends to out the configured taints a daemon Pod of
// spec would not tolerate.
func untoleratedTaints(out []TaintConfig, spec *corev1.PodSpec, p *ControlPlaneTolerationParams) []TaintConfig {
	for _, t := range p.Taints {
		taint := t.taint()
		if !coverage.ToleratedByDaemonPod(spec, &taint) {
			out = append(out, t)
		}
	}
	return out
}

// aimsAt reports whether ds's placement (nodeName, nodeSelector, required
// node affinity) selects nodes that carry t: the live nodes that carry it
// when there are some, otherwise model nodes labelled like them. A
// placement too large to judge counts as aiming at them, so that size is
// never a way out.
func aimsAt(ds *appsv1.DaemonSet, t TaintConfig, env *policy.Env) bool {
	spec := &ds.Spec.Template.Spec
	if env.PlacementTooLarge(ds) != "" {
		return true
	}
	if env.Nodes != nil && env.Nodes.HasTaint(t.Key, t.Value, t.Effect) {
		return env.Nodes.ReachesTaint(spec, t.Key, t.Value, t.Effect)
	}
	return coverage.ReachesAny(spec, coverage.ModelTaintedNodes(t.Key, t.Value))
}

// nodesSkippedFor counts the nodes the prediction skips for one of taints
// and returns the first limit of their names in order: the first of each
// skip, merged (skips never share a node).
func nodesSkippedFor(cov *coverage.Coverage, taints []TaintConfig, limit int) ([]string, int) {
	patterns := taintsOf(taints)
	var out []string
	n := 0
	for _, s := range cov.Skips {
		if s.Kind == coverage.SkipTaint && policy.MatchesAnyTaint(patterns, s.Taint) {
			out = append(out, s.FirstNodes(limit)...)
			n += s.Count
		}
	}
	sort.Strings(out)
	return out[:min(len(out), limit)], n
}

// reportedTaints are the taints whose skipped nodes this rule's finding names,
// so that node-coverage does not report the same nodes again.
func reportedTaints(ds *appsv1.DaemonSet, p *ControlPlaneTolerationParams) []corev1.Taint {
	// A taint the placement does not aim at has no skipped nodes to report
	// twice, so every untolerated taint can be claimed.
	return taintsOf(untoleratedTaints(nil, &ds.Spec.Template.Spec, p))
}

// taintsOf turns configured taints into patterns for MatchesAnyTaint (an
// empty value stands for every value of the key).
func taintsOf(taints []TaintConfig) []corev1.Taint {
	out := make([]corev1.Taint, len(taints))
	for i, t := range taints {
		out[i] = t.taint()
	}
	return out
}

// tolerationHint is the remediation: the toleration to add for each
// untolerated taint.
func tolerationHint(untolerated []TaintConfig) string {
	const (
		prefix = "add to spec.template.spec.tolerations: "
		key    = "{key: "
		effect = ", operator: Exists, effect: "
	)
	n := len(prefix)
	for _, t := range untolerated {
		n += len(key) + len(t.Key) + len(effect) + len(t.Effect) + len("}, ")
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(prefix)
	for i, t := range untolerated {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(key)
		b.WriteString(t.Key)
		b.WriteString(effect)
		b.WriteString(string(t.Effect))
		b.WriteByte('}')
	}
	return b.String()
}

// controlPlaneTolerationCEL is the rule's CEL form.
func controlPlaneTolerationCEL(in policy.CELInput) []policy.CELCheck {
	p := celform.Params[ControlPlaneTolerationParams](in.Config, controlPlaneTolerationID)
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
		var nodes []celform.Node
		for _, n := range coverage.ModelTaintedNodes(t.Key, t.Value) {
			nodes = append(nodes, celform.NewNode(n))
		}
		reachVar := func(o string, n int) string { return fmt.Sprintf("%sReachesTaint%dNode%d", o, i, n) }
		for _, o := range []string{"object", "oldObject"} {
			for j, n := range nodes {
				vars = append(vars, [2]string{reachVar(o, j), celform.ReachesNode(o, "variables."+celform.ValidTermsVar(o), n)})
			}
		}
		taints = append(taints, taintCEL{text: t.String(), hint: fmt.Sprintf("{key: %s, operator: Exists, effect: %s}", t.Key, t.Effect), untolered: func(o string) string {
			s := celform.PodSpec(o)
			tolerated := fmt.Sprintf("(has(%[1]s.tolerations) && %[1]s.tolerations.exists(t, "+
				"(!has(t.effect) || t.effect == '' || t.effect == %[2]s) && "+
				"(!has(t.key) || t.key == '' || t.key == %[3]s) && "+
				"(has(t.operator) && t.operator == 'Exists' || "+
				"(!has(t.operator) || t.operator == '' || t.operator == 'Equal') && (has(t.value) ? t.value : '') == %[4]s)))",
				s, celform.Lit(string(t.Effect)), celform.Lit(t.Key), celform.Lit(t.Value))
			if byHostNetwork {
				tolerated = fmt.Sprintf("(%s || (has(%s.hostNetwork) && %s.hostNetwork))", tolerated, s, s)
			}
			// A placement too large to judge counts as aiming at the
			// tainted nodes, so that size is never a way out.
			aims := []string{"variables." + celform.TooLargeVar(o)}
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
		first = append(first, [2]string{celform.TooLargeVar(o), celform.PlacementTooLarge(o)}, [2]string{celform.ValidTermsVar(o), celform.ValidTerms(o)})
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
	// celform.ContainerCheck), so that each taint is judged once for the message.
	var missing []string
	for _, t := range taints {
		missing = append(missing, fmt.Sprintf("(%s ? [[%s, %s]] : [])", t.untolered("object"), celform.Lit(t.text), celform.Lit(t.hint)))
	}
	msg := fmt.Sprintf("[%s].map(m, '[control-plane-toleration] spec.template.spec.tolerations: no toleration for ' + m.map(t, t[0]).join(', ') + "+
		"': skips every node with that taint, unseen in desiredNumberScheduled; fix: add to spec.template.spec.tolerations: ' + m.map(t, t[1]).join(', '))[0]",
		strings.Join(missing, " + "))
	c := celform.WholeObject(policy.ActionDeny, violated, msg)
	c.Variables = vars
	return []policy.CELCheck{c}
}
