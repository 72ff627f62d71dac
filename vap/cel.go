package vap

import (
	"fmt"
	"strings"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
)

// labelSelectorCEL is a CEL condition: the DaemonSet's own labels (not the
// old object's) match the selector, as the webhook judges scope.
func labelSelectorCEL(s *policy.LabelSelectorConfig) string {
	const labels = "(has(object.metadata.labels) ? object.metadata.labels : {})"
	var parts []string
	keys := celform.SortedKeys(s.MatchLabels)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("(%s in %s && %s[%s] == %s)", celform.Lit(k), labels, labels, celform.Lit(k), celform.Lit(s.MatchLabels[k])))
	}
	for _, r := range s.MatchExpressions {
		k := celform.Lit(r.Key)
		switch r.Operator {
		case "In":
			parts = append(parts, fmt.Sprintf("(%s in %s && %s[%s] in %s)", k, labels, labels, k, celform.LitList(r.Values)))
		case "NotIn":
			parts = append(parts, fmt.Sprintf("!(%s in %s && %s[%s] in %s)", k, labels, labels, k, celform.LitList(r.Values)))
		case "Exists":
			parts = append(parts, fmt.Sprintf("(%s in %s)", k, labels))
		case "DoesNotExist":
			parts = append(parts, fmt.Sprintf("!(%s in %s)", k, labels))
		}
	}
	if len(parts) == 0 {
		return "true"
	}
	return strings.Join(parts, " && ")
}
