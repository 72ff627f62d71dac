package webhook

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// PolicyConfigMapPath is where the API server sends reviews of the policy ConfigMap.
const PolicyConfigMapPath = "/validate-policy"

// PolicyConfigMapValidator refuses a policy ConfigMap whose policy does not
// parse or validate, so `kubectl apply` of a broken policy fails with its line
// and field instead of being discovered later in dsguard's logs.
type PolicyConfigMapValidator struct {
	Ref clusterview.PolicyRef
}

var _ admission.Validator[*corev1.ConfigMap] = &PolicyConfigMapValidator{}

// ValidateCreate implements admission.Validator.
func (v *PolicyConfigMapValidator) ValidateCreate(_ context.Context, cm *corev1.ConfigMap) (admission.Warnings, error) {
	warnings, _, err := v.validate(cm)
	return warnings, err
}

// ValidateUpdate implements admission.Validator. Beside the baseline, the
// new policy is judged against the one it replaces: a change that lowers
// enforcement (a deny rule turned to warn) may leave the policy above the
// baseline and still matter, so the person applying it is told each one.
// An old document that is absent or invalid enforced nothing dsguard could
// compare with, so nothing is said about weakening it.
func (v *PolicyConfigMapValidator) ValidateUpdate(_ context.Context, oldCM, cm *corev1.ConfigMap) (admission.Warnings, error) {
	warnings, cfg, err := v.validate(cm)
	if err != nil || cfg == nil || oldCM == nil {
		return warnings, err
	}
	oldData, ok := oldCM.Data[v.Ref.Key]
	if !ok {
		return warnings, nil
	}
	oldCfg, err := rules.Builtin().ParseConfig([]byte(oldData))
	if err != nil {
		return warnings, nil
	}
	for _, w := range policy.Weakenings(oldCfg, cfg) {
		warnings = append(warnings, oneLine("dsguard: this policy change lowers enforcement: "+w.Detail))
	}
	return warnings, nil
}

// ValidateDelete implements admission.Validator: deleting the policy is
// allowed, because refusing would wedge `helm uninstall` and the deletion of
// dsguard's namespace, but said out loud. dsguard keeps enforcing the last
// good policy (reporting Degraded), so a deletion never quietly weakens it.
func (v *PolicyConfigMapValidator) ValidateDelete(_ context.Context, cm *corev1.ConfigMap) (admission.Warnings, error) {
	if !v.isPolicy(cm) {
		return nil, nil
	}
	return admission.Warnings{"dsguard: policy ConfigMap deleted; dsguard keeps enforcing the last good policy and reports Degraded until it is created again"}, nil
}

func (v *PolicyConfigMapValidator) isPolicy(cm *corev1.ConfigMap) bool {
	return cm.Namespace == v.Ref.Namespace && cm.Name == v.Ref.Name
}

var configMapGroupKind = schema.GroupKind{Kind: "ConfigMap"}

// validate returns the warnings about cm's policy and, when it is the
// policy and valid, its document.
func (v *PolicyConfigMapValidator) validate(cm *corev1.ConfigMap) (admission.Warnings, *policy.Config, error) {
	// The webhook configuration's matchCondition should send only the
	// policy ConfigMap; anything else is admitted untouched.
	if !v.isPolicy(cm) {
		return nil, nil, nil
	}
	keyPath := field.NewPath("data").Key(v.Ref.Key)
	data, ok := cm.Data[v.Ref.Key]
	if !ok {
		return nil, nil, apierrors.NewInvalid(configMapGroupKind, cm.Name, field.ErrorList{
			field.Required(keyPath, "the dsguard policy (a PolicyConfig YAML document)"),
		})
	}
	cfg, err := rules.Builtin().ParseConfig([]byte(data))
	var p *policy.Policy
	if err == nil {
		p, err = policy.Compile(cfg)
	}
	if err != nil {
		var errs field.ErrorList
		if ce, ok := err.(*policy.ConfigError); ok {
			for _, p := range ce.Problems {
				errs = append(errs, field.Invalid(keyPath, policyPosition(p), p.Message))
			}
		} else {
			errs = append(errs, field.Invalid(keyPath, "", err.Error()))
		}
		return nil, nil, apierrors.NewInvalid(configMapGroupKind, cm.Name, errs)
	}
	// A weaker policy may be a staged roll-out, so it is admitted; the
	// person applying it is told, and so is whoever watches the Events and
	// dsguard_policy_weakened.
	var warnings admission.Warnings
	for _, w := range p.Weaknesses() {
		warnings = append(warnings, oneLine("dsguard: this policy is weaker than the baseline: "+w.Detail))
	}
	return warnings, cfg, nil
}

// policyPosition says where in the embedded document a problem is, e.g.
// "line 7, rules.max-unavailable.action".
func policyPosition(p policy.ConfigProblem) string {
	var parts []string
	if p.Line > 0 {
		parts = append(parts, fmt.Sprintf("line %d", p.Line))
	}
	if p.Field != "" {
		parts = append(parts, p.Field)
	}
	return strings.Join(parts, ", ")
}
