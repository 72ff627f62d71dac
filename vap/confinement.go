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
			Variables: []admissionregistrationv1.Variable{
				{Name: "names", Expression: "[" + strings.Join(quoted, ", ") + "]"},
				{Name: "action", Expression: actionOfNameCEL()},
				{Name: "policy", Expression: "request.resource.resource == 'validatingadmissionpolicies'"},
			},
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
					Expression: "variables.policy || (object.spec.policyName == object.metadata.name && !has(object.spec.paramRef))",
					Message:    "a generated binding binds the generated policy of its own name, without parameters",
					Reason:     &forbidden,
				},
				{
					Expression: "variables.policy || object.spec.validationActions == [variables.action] && !has(object.spec.matchResources)",
					MessageExpression: `"a generated binding carries the action its name says, [" + variables.action + "], and no matchResources of its own; " +
						object.metadata.name + (has(object.spec.matchResources) ? " has matchResources" : " has [" + object.spec.validationActions.join(", ") + "]")`,
					Reason: &forbidden,
				},
				{
					Expression: "!variables.policy || " + daemonSetWritesCEL,
					Message: "a generated policy judges CREATE and UPDATE of apps/v1 daemonsets (and daemonsets/status) alone, in namespaces " +
						"picked by kubernetes.io/metadata.name In or NotIn: no other resource, no resourceNames, no excludeResourceRules, " +
						"matchPolicy Equivalent, no paramKind",
					Reason: &forbidden,
				},
				{
					Expression:        "!variables.policy || variables.action == 'Deny' || object.spec.failurePolicy == 'Ignore'",
					MessageExpression: `"only a generated deny policy may fail closed: " + object.metadata.name + " must have failurePolicy Ignore"`,
					Reason:            &forbidden,
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

// actionOfNameCEL is NameAction in CEL, on the object's name.
func actionOfNameCEL() string {
	expr := "''"
	for i := len(nameActions) - 1; i >= 0; i-- {
		expr = fmt.Sprintf("object.metadata.name.endsWith('%s') ? '%s' : %s", nameActions[i].suffix, nameActions[i].action, expr)
	}
	return expr
}

// daemonSetWritesCEL holds for the matchConstraints daemonSetWrites builds
// and their defaults (scope '*', empty selectors): the only writes a
// generated policy may judge. The object selector stays free, as a rule's
// scope may pick DaemonSets by any label.
const daemonSetWritesCEL = `!has(object.spec.paramKind) && ` +
	`object.spec.matchConstraints.?matchPolicy.orValue('Equivalent') == 'Equivalent' && ` +
	`object.spec.matchConstraints.?excludeResourceRules.orValue([]).size() == 0 && ` +
	`object.spec.matchConstraints.?resourceRules.orValue([]).size() == 1 && ` +
	`object.spec.matchConstraints.resourceRules.all(r, ` +
	`r.?apiGroups.orValue([]) == ['apps'] && r.?apiVersions.orValue([]) == ['v1'] && ` +
	`(r.?resources.orValue([]) == ['daemonsets'] || r.?resources.orValue([]) == ['daemonsets', 'daemonsets/status']) && ` +
	`r.?operations.orValue([]) == ['CREATE', 'UPDATE'] && r.?resourceNames.orValue([]).size() == 0 && r.?scope.orValue('*') == '*') && ` +
	`object.spec.matchConstraints.?namespaceSelector.?matchLabels.orValue({}).size() == 0 && ` +
	`object.spec.matchConstraints.?namespaceSelector.?matchExpressions.orValue([]).all(e, ` +
	`e.key == 'kubernetes.io/metadata.name' && (e.operator == 'In' || e.operator == 'NotIn'))`
