package celform

// ExpiryGap is what every rule's generated policies share about exemption
// expiries.
const ExpiryGap = "an exemption's expiry is judged against the day the policies were rendered (CEL has no clock); dsguard serve renders them again at least every ten minutes"

// Gaps lists what a rule's generated policies do not check the way the
// webhook does: what is particular to the rule, then what every exemptible
// rule's policies share (docs/modes.md carries the same lists).
func Gaps(particular ...string) []string {
	return append(particular,
		ExpiryGap,
		"an exemption value longer than 4,096 characters is not honoured (regular expressions cost in proportion to the string)",
		"exempted findings leave no audit annotation",
		"exemptions.allowedGroups is applied by the exemption-gate policies, not here: in the fail-open namespaces, where the gate only warns, an exemption that someone outside those groups adds counts for the request that adds it, whose findings of this rule then go unreported (the webhook voids it for that request and warns)",
	)
}
