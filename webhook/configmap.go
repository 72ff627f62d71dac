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
	return v.validate(cm)
}

// ValidateUpdate implements admission.Validator.
func (v *PolicyConfigMapValidator) ValidateUpdate(_ context.Context, _, cm *corev1.ConfigMap) (admission.Warnings, error) {
	return v.validate(cm)
}

// ValidateDelete implements admission.Validator: deleting the policy is
// allowed (dsguard falls back to its built-in defaults) but said out loud.
func (v *PolicyConfigMapValidator) ValidateDelete(_ context.Context, cm *corev1.ConfigMap) (admission.Warnings, error) {
	if !v.isPolicy(cm) {
		return nil, nil
	}
	return admission.Warnings{"dsguard: deleting the policy ConfigMap makes dsguard enforce its built-in defaults"}, nil
}

func (v *PolicyConfigMapValidator) isPolicy(cm *corev1.ConfigMap) bool {
	return cm.Namespace == v.Ref.Namespace && cm.Name == v.Ref.Name
}

var configMapGroupKind = schema.GroupKind{Kind: "ConfigMap"}

func (v *PolicyConfigMapValidator) validate(cm *corev1.ConfigMap) (admission.Warnings, error) {
	// The webhook configuration's matchCondition should send only the
	// policy ConfigMap; anything else is admitted untouched.
	if !v.isPolicy(cm) {
		return nil, nil
	}
	keyPath := field.NewPath("data").Key(v.Ref.Key)
	data, ok := cm.Data[v.Ref.Key]
	if !ok {
		return nil, apierrors.NewInvalid(configMapGroupKind, cm.Name, field.ErrorList{
			field.Required(keyPath, "the dsguard policy (a PolicyConfig YAML document)"),
		})
	}
	if _, err := rules.Builtin().Parse([]byte(data)); err != nil {
		var errs field.ErrorList
		if ce, ok := err.(*policy.ConfigError); ok {
			for _, p := range ce.Problems {
				errs = append(errs, field.Invalid(keyPath, policyPosition(p), p.Message))
			}
		} else {
			errs = append(errs, field.Invalid(keyPath, "", err.Error()))
		}
		return nil, apierrors.NewInvalid(configMapGroupKind, cm.Name, errs)
	}
	return nil, nil
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
