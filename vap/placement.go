package vap

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/policy"
)

// This file renders, in CEL, whether a pod spec's placement reaches a node
// whose name and labels are constants: the model tainted nodes of
// coverage.ModelTaintedNodes, which control-plane-toleration judges a
// placement against when it has no live nodes. The CEL follows
// coverage.ReachesAny, that is k8s.io/component-helpers' nodeaffinity:
//
//   - spec.nodeName, when set, must be the node's name;
//   - every nodeSelector entry must equal the node's label (not validated);
//   - with a required node affinity, one of its terms must match: a term
//     without requirements matches nothing, and a term with an invalid
//     requirement (a bad key, operator, value count or label value, or a
//     Gt/Lt value that is not a 64-bit integer) matches nothing either,
//     as a requirement the scheduler cannot parse fails its whole term.
//
// The API server rejects most invalid requirements before admission (all
// but non-integer Gt/Lt values, and label values an UPDATE keeps from an
// older object); the CEL judges them anyway, so that it never errors and
// agrees with the engine on any object.

// Regular expressions of k8s.io/apimachinery's label validation, anchored,
// with the length limits folded in where a bounded repetition can say them.
const (
	// labelValueRE is a valid label value: empty, or at most 63
	// alphanumerics, '-', '_' and '.', starting and ending alphanumeric.
	labelValueRE = `^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`
	// labelKeyRE is a valid label key: an optional DNS subdomain prefix and
	// '/', then a name like a non-empty label value. The prefix's 253
	// characters are checked apart.
	labelKeyRE = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
)

// labelKeyValid is a CEL condition: the string k is a valid label key.
func labelKeyValid(k string) string {
	return fmt.Sprintf("(%[1]s.matches(%[2]s) && (!%[1]s.contains('/') || %[1]s.indexOf('/') <= 253))", k, lit(labelKeyRE))
}

// labelValueValid is a CEL condition: the string v is a valid label value.
// The size comes first, so that the regular expression never reads a long
// string.
func labelValueValid(v string) string {
	return fmt.Sprintf("(size(%[1]s) <= 63 && %[1]s.matches(%[2]s))", v, lit(labelValueRE))
}

// parsesAsInt64 is a CEL condition on a valid label value v (so unsigned):
// strconv.ParseInt(v, 10, 64) succeeds, so that CEL's int(v), which parses
// the same way, cannot fail. Nineteen significant digits are compared with
// the largest int64 as strings of equal length.
func parsesAsInt64(v string) string {
	return fmt.Sprintf("(%[1]s.matches('^0*[0-9]{1,18}$') || %[1]s.matches('^0*[1-9][0-9]{18}$') && %[1]s.substring(size(%[1]s) - 19) <= '9223372036854775807')", v)
}

// celNode is one constant node as CEL literals.
type celNode struct {
	name string
	// labels is a CEL map literal of the node's labels.
	labels string
	// ints is a CEL map literal of the labels whose values parse as int64s
	// (what Gt and Lt compare), or "" when there are none.
	ints string
}

func newCELNode(n *corev1.Node) celNode {
	var labels, ints []string
	for _, k := range sortedKeys(n.Labels) {
		v := n.Labels[k]
		labels = append(labels, lit(k)+": "+lit(v))
		if i, err := strconv.ParseInt(v, 10, 64); err == nil {
			ints = append(ints, fmt.Sprintf("%s: %d", lit(k), i))
		}
	}
	out := celNode{name: n.Name, labels: "{" + strings.Join(labels, ", ") + "}"}
	if len(ints) > 0 {
		out.ints = "{" + strings.Join(ints, ", ") + "}"
	}
	return out
}

// requiredTerms is the pod spec's required node affinity terms, after the
// has() chain that guards them.
func requiredTerms(s string) (guard, terms string) {
	req := s + ".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
	return fmt.Sprintf("has(%[1]s.affinity) && has(%[1]s.affinity.nodeAffinity) && has(%[2]s)", s, req), req + ".nodeSelectorTerms"
}

// termsPresent is a CEL condition: the terms list is there. It is a field
// without omitempty, so an affinity without terms (which the API server
// rejects) carries it as null.
func termsPresent(terms string) string {
	return fmt.Sprintf("(has(%[1]s) && type(%[1]s) == list)", terms)
}

// placementTooLarge is a CEL condition on an object expression: its
// required node affinity has more terms or values than the engine judges
// (policy.MaxAffinityTerms, policy.MaxAffinityValues; coverage.SizeOf
// counts the values of match expressions and match fields).
func placementTooLarge(o string) string {
	guard, terms := requiredTerms(podSpec(o))
	values := func(list string) string {
		return fmt.Sprintf("(has(t.%[1]s) ? t.%[1]s.map(r, has(r.values) ? size(r.values) : 0).sum() : 0)", list)
	}
	return fmt.Sprintf("(%[1]s && %[7]s && (size(%[2]s) > %[3]d || %[2]s.map(t, %[4]s + %[5]s).sum() > %[6]d))",
		guard, terms, policy.MaxAffinityTerms, values("matchExpressions"), values("matchFields"), policy.MaxAffinityValues, termsPresent(terms))
}

// reachesNode is a CEL condition on an object expression: the pod spec's
// nodeName, nodeSelector and required node affinity select the node n.
func reachesNode(o string, n celNode) string {
	s := podSpec(o)
	name := fmt.Sprintf("(!has(%[1]s.nodeName) || %[1]s.nodeName == '' || %[1]s.nodeName == %[2]s)", s, lit(n.name))
	selector := fmt.Sprintf("(!has(%[1]s.nodeSelector) || %[1]s.nodeSelector.all(k, k in %[2]s && %[2]s[k] == %[1]s.nodeSelector[k]))", s, n.labels)
	guard, terms := requiredTerms(s)
	affinity := fmt.Sprintf("(!(%[1]s) || %[4]s && %[2]s.exists(t, %[3]s))", guard, terms, termMatches("t", n), termsPresent(terms))
	return fmt.Sprintf("(%s && %s && %s)", name, selector, affinity)
}

// termMatches is a CEL condition: the node selector term t matches n.
func termMatches(t string, n celNode) string {
	nonEmpty := fmt.Sprintf("(has(%[1]s.matchExpressions) && size(%[1]s.matchExpressions) > 0 || has(%[1]s.matchFields) && size(%[1]s.matchFields) > 0)", t)
	fields := fmt.Sprintf("(!has(%[1]s.matchFields) || %[1]s.matchFields.all(f, %[2]s))", t, fieldMatches("f", n))
	exprs := fmt.Sprintf("(!has(%[1]s.matchExpressions) || %[1]s.matchExpressions.all(r, %[2]s))", t, requirementMatches("r", n))
	return fmt.Sprintf("(%s && %s && %s)", nonEmpty, fields, exprs)
}

// fieldMatches is a CEL condition: the match-fields requirement f is valid
// (In or NotIn, one value) and holds for n. Only metadata.name is a node
// field; any other key reads as empty, as in a fields.Set.
func fieldMatches(f string, n celNode) string {
	if n.name == "" {
		// A node without a name has no fields: the requirement is only parsed.
		return fmt.Sprintf("(has(%[1]s.values) && size(%[1]s.values) == 1 && %[1]s.operator in ['In', 'NotIn'])", f)
	}
	value := fmt.Sprintf("(%s.key == 'metadata.name' ? %s : '')", f, lit(n.name))
	return fmt.Sprintf("(has(%[1]s.values) && size(%[1]s.values) == 1 && (%[1]s.operator == 'In' ? %[2]s == %[1]s.values[0] : %[1]s.operator == 'NotIn' && %[2]s != %[1]s.values[0]))", f, value)
}

// requirementMatches is a CEL condition: the match-expressions requirement
// r is valid and holds for n's labels. A key of n is a valid label key, so
// only a key n lacks needs checking, and only where that would match
// (NotIn, DoesNotExist).
func requirementMatches(r string, n celNode) string {
	key := r + ".key"
	values := fmt.Sprintf("(has(%[1]s.values) && size(%[1]s.values) > 0 && %[1]s.values.all(v, %[2]s))", r, labelValueValid("v"))
	noValues := fmt.Sprintf("(!has(%[1]s.values) || size(%[1]s.values) == 0)", r)
	in := fmt.Sprintf("(%[1]s in %[2]s && %[2]s[%[1]s] in %[3]s.values)", key, n.labels, r)
	compare := "false"
	if n.ints != "" {
		one := r + ".values[0]"
		compare = fmt.Sprintf("(%[1]s in %[2]s && has(%[3]s.values) && size(%[3]s.values) == 1 && %[4]s && %[5]s && "+
			"(%[3]s.operator == 'Gt' ? %[2]s[%[1]s] > int(%[6]s) : %[2]s[%[1]s] < int(%[6]s)))",
			key, n.ints, r, labelValueValid(one), parsesAsInt64(one), one)
	}
	return fmt.Sprintf("(%[1]s.operator == 'In' ? %[2]s && %[3]s : "+
		"%[1]s.operator == 'NotIn' ? %[2]s && (%[4]s in %[5]s ? !(%[5]s[%[4]s] in %[1]s.values) : %[6]s) : "+
		"%[1]s.operator == 'Exists' ? %[7]s && %[4]s in %[5]s : "+
		"%[1]s.operator == 'DoesNotExist' ? %[7]s && !(%[4]s in %[5]s) && %[6]s : "+
		"%[1]s.operator in ['Gt', 'Lt'] && %[8]s)",
		r, values, in, key, n.labels, labelKeyValid(key), noValues, compare)
}
