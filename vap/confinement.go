package vap

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfinementName names the static policy and binding of Confinement. The
// suffix is the one the API server requires of objects it loads from its
// static manifests directory (and refuses to anyone writing through the API).
const ConfinementName = "dsguard-generated-names.static.k8s.io"

// Confinement is the policy that limits what dsguard's ServiceAccount
// (user, "system:serviceaccount:<namespace>:<name>") may create among
// ValidatingAdmissionPolicies and bindings: only the names Render can
// generate (PossibleNames), labelled as dsguard's, and a binding only of the
// policy of its own name, without parameters. RBAC limits update and delete
// by name but cannot limit create.
//
// It must be loaded as a static manifest (the ValidatingAdmissionPolicy
// plugin's staticManifestsDir in the API server's admission configuration):
// the API server evaluates policies created through its API on no
// ValidatingAdmissionPolicy or binding, so the same policy applied with
// kubectl would never refuse anything.
func Confinement(user string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	if !strings.HasPrefix(user, "system:serviceaccount:") || strings.Count(user, ":") != 3 || strings.ContainsAny(user, `'"\`) {
		return nil, nil, fmt.Errorf("%q is not a ServiceAccount's user name (system:serviceaccount:<namespace>:<name>)", user)
	}
	names := PossibleNames()
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	fail := admissionregistrationv1.Fail
	forbidden := metav1.StatusReasonForbidden
	equivalent := admissionregistrationv1.Equivalent
	meta := metav1.ObjectMeta{Name: ConfinementName, Labels: map[string]string{"app.kubernetes.io/managed-by": "dsguard"}}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				MatchPolicy: &equivalent,
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"admissionregistration.k8s.io"}, APIVersions: []string{"*"},
						Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}},
				}}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "dsguard-service-account", Expression: "request.userInfo.username == '" + user + "'"}},
			Variables:       []admissionregistrationv1.Variable{{Name: "names", Expression: "[" + strings.Join(quoted, ", ") + "]"}},
			Validations: []admissionregistrationv1.Validation{
				{
					Expression:        "object.metadata.name in variables.names",
					MessageExpression: `"dsguard's ServiceAccount may write no ValidatingAdmissionPolicy or binding but the ones it generates, not " + object.metadata.name`,
					Reason:            &forbidden,
				},
				{
					Expression: "object.metadata.?labels[?'app.kubernetes.io/managed-by'].orValue('') == 'dsguard'",
					Message:    "a generated policy or binding must carry app.kubernetes.io/managed-by: dsguard",
					Reason:     &forbidden,
				},
				{
					Expression: "request.resource.resource != 'validatingadmissionpolicybindings' || (object.spec.policyName == object.metadata.name && !has(object.spec.paramRef))",
					Message:    "a generated binding binds the generated policy of its own name, without parameters",
					Reason:     &forbidden,
				},
			},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        ConfinementName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return policy, binding, nil
}
