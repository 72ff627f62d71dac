package rules

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
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
func (t TaintConfig) String() string {
	taint := t.taint()
	return taint.ToString()
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
		"desiredNumberScheduled silently excludes them, so counter-based alerts stay green.",
	Remediation: "Add a toleration for each listed taint to spec.template.spec.tolerations " +
		"(for example {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}), " +
		"or declare the gap with the coverage.dsguard.io/intended annotation.",
	DefaultAction: policy.ActionDeny,
	Exemptible:    true,
	Params: []policy.ParamDoc{{
		Name: "taints", Type: "list of {key, value, effect}",
		Default:     "[{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]",
		Description: "Taints every DaemonSet must tolerate. Effect is NoSchedule or NoExecute.",
	}},
}, defaultControlPlaneTolerationParams, checkControlPlaneToleration), reportedTaints)

func checkControlPlaneToleration(ds *appsv1.DaemonSet, env *policy.Env, p *ControlPlaneTolerationParams) []policy.Finding {
	untolerated := untoleratedRequiredTaints(&ds.Spec.Template.Spec, p)
	if len(untolerated) == 0 {
		return nil
	}
	missing := make([]string, len(untolerated))
	present := env.Nodes == nil // offline, assume the taints exist
	for i, t := range untolerated {
		missing[i] = t.String()
		present = present || env.Nodes.HasTaint(t.Key, t.Value, t.Effect)
	}
	skips := "skips every node with that taint"
	if cov := env.Coverage(ds); cov != nil {
		if names := nodesSkippedFor(cov, untolerated); len(names) > 0 {
			skips = "skips " + namesList(names, nodesNamed) + " (" + ofNodes(len(names), cov.Total) + ")"
		}
	}
	f := policy.Finding{
		Field: tolerationsPath,
		Message: fmt.Sprintf("no toleration for %s: %s, unseen in desiredNumberScheduled",
			strings.Join(missing, ", "), skips),
		Remediation: fmt.Sprintf("add to spec.template.spec.tolerations: %s", tolerationHint(p.Taints, missing)),
	}
	if !present {
		// A managed control plane has no such nodes: nothing is skipped
		// today, so this is advice, never a deny.
		f.Action = policy.ActionWarn
		f.Message = fmt.Sprintf("no toleration for %s: no node carries it today, but such nodes would be skipped",
			strings.Join(missing, ", "))
	}
	if reason, ok := policy.IntendedCoverage(ds.Annotations); ok {
		f.Action = policy.ActionAudit
		f.Message = fmt.Sprintf("skips nodes tainted %s, as intended: %s", strings.Join(missing, ", "), reason)
	}
	return []policy.Finding{f}
}

// untoleratedRequiredTaints returns the configured taints a daemon Pod of
// spec would not tolerate, leaving out DaemonSets that deliberately target a
// subset: pinned to one node, or narrowed by labels other than OS and
// architecture (node-coverage judges those against the live nodes).
func untoleratedRequiredTaints(spec *corev1.PodSpec, p *ControlPlaneTolerationParams) []TaintConfig {
	if spec.NodeName != "" {
		return nil
	}
	var out []TaintConfig
	for _, t := range p.Taints {
		// Selecting on the taint's own key (nodeSelector
		// node-role.kubernetes.io/control-plane: "") aims at exactly the
		// tainted nodes, so the toleration matters all the more.
		if narrowsPlacement(spec, t.Key) {
			continue
		}
		taint := t.taint()
		if !coverage.ToleratedByDaemonPod(spec, &taint) {
			out = append(out, t)
		}
	}
	return out
}

// nodesSkippedFor returns the nodes the prediction skips for one of taints.
func nodesSkippedFor(cov *coverage.Coverage, taints []TaintConfig) []string {
	patterns := taintsOf(taints)
	var out []string
	for _, s := range cov.Skips {
		if s.Kind == coverage.SkipTaint && policy.MatchesAnyTaint(patterns, s.Taint) {
			out = append(out, s.Nodes...)
		}
	}
	sort.Strings(out)
	return out
}

// reportedTaints are the taints whose skipped nodes this rule's finding names,
// so that node-coverage does not report the same nodes again.
func reportedTaints(ds *appsv1.DaemonSet, p *ControlPlaneTolerationParams) []corev1.Taint {
	return taintsOf(untoleratedRequiredTaints(&ds.Spec.Template.Spec, p))
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

// namesList joins names, at most limit of them, then "and N more".
func namesList(names []string, limit int) string {
	if len(names) <= limit {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:limit], ", "), len(names)-limit)
}

func tolerationHint(taints []TaintConfig, missing []string) string {
	var parts []string
	for _, t := range taints {
		for _, m := range missing {
			if m == t.String() {
				parts = append(parts, fmt.Sprintf("{key: %s, operator: Exists, effect: %s}", t.Key, t.Effect))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// narrowsPlacement reports whether the template deliberately selects a subset
// of nodes: by a label other than OS, architecture or taintKey in its
// nodeSelector, or in every term of its required node affinity (the terms
// are ORed, so one unrestricted term reaches every node). Selecting the
// taint's own key with In or Exists aims at the tainted nodes and is not a
// way out; NotIn or DoesNotExist on it steers clear of them deliberately.
func narrowsPlacement(spec *corev1.PodSpec, taintKey string) bool {
	for k := range spec.NodeSelector {
		if !coverage.IsOSArchLabel(k) && k != taintKey {
			return true
		}
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil ||
		spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return false
	}
	for _, term := range terms {
		if !termNarrows(&term, taintKey) {
			return false
		}
	}
	return true
}

// termNarrows reports whether one node selector term reaches only some
// nodes. An empty term matches no node at all.
func termNarrows(term *corev1.NodeSelectorTerm, taintKey string) bool {
	if len(term.MatchFields) > 0 || len(term.MatchExpressions) == 0 {
		return true
	}
	for _, req := range term.MatchExpressions {
		switch {
		case coverage.IsOSArchLabel(req.Key):
		case req.Key == taintKey && (req.Operator == corev1.NodeSelectorOpIn || req.Operator == corev1.NodeSelectorOpExists):
		default:
			return true
		}
	}
	return false
}
