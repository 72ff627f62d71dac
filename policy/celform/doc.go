// Package celform holds the pieces a rule's CEL form is built from: the
// form is written beside the rule's Go check (policy.Rule.CEL), and package
// vap walks the catalogue to render the generated ValidatingAdmissionPolicies.
//
// Every helper returns CEL source text. Object expressions are "object" or
// "oldObject", as in a ValidatingAdmissionPolicy.
package celform
