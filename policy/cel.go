package policy

// CELCheck is one kind of finding of a rule, in CEL, for the generated
// ValidatingAdmissionPolicies (package vap). A rule's Rule.CEL returns its
// checks; the helpers that build them are in package policy/celform.
type CELCheck struct {
	// Cap is the strongest action this kind of finding can have (the
	// webhook softens some findings by nature, e.g. a hostNetwork agent that
	// declares no ports only warns).
	Cap Action
	// Violated is a CEL condition on an object expression ("object" or
	// "oldObject"): the object has a finding of this kind.
	Violated func(o string) string
	// Introduced is a CEL condition: the object has a finding of this kind
	// at a field where the old object has none (the webhook ratchets by
	// rule and field path).
	Introduced string
	// Message is a CEL string expression on object, one line: what the
	// webhook says, as far as CEL can say it.
	Message string
	// IntroducedMessage, when set, is Message about the first finding the
	// update introduces (Introduced holds): what a ratcheted deny names,
	// where Message could name a finding the old object already had.
	IntroducedMessage string
	// Variables are policy variables (name, expression) the expressions
	// above refer to as variables.<name>.
	Variables [][2]string
}

// CELInput is what a rule's CEL form is rendered from.
type CELInput struct {
	Config *Config
	// Today is the day exemption expiries are judged against, YYYY-MM-DD
	// (CEL has no clock).
	Today string
	// Catalogue is every rule, for the rules that judge the others
	// (invalid-annotation checks exemptions by rule ID).
	Catalogue []*Rule
}
