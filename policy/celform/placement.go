package celform

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
//     without requirements matches nothing, and a term with a requirement
//     the scheduler cannot parse (an unknown operator, a wrong number of
//     values, a value that is no label value, a Gt/Lt value that is no
//     64-bit integer) matches nothing either.
//
// The API server rejects most invalid requirements before admission (all
// but non-integer Gt/Lt values, and label values an UPDATE keeps from an
// older object). The CEL checks every one of them except an invalid key,
// so that it never errors and agrees with the engine on every object the
// API server admits.

// labelValueRE is k8s.io/apimachinery's label value, anchored, with its
// length folded in: empty, or at most 63 alphanumerics, '-', '_' and '.',
// starting and ending alphanumeric ([^\W_]). It is written short, as a
// regular expression costs in proportion to its length.
const labelValueRE = `^([^\W_]([-\w.]{0,61}[^\W_])?)?$`

// labelValueValid is a CEL condition: the string v is a valid label value.
// The size comes first, so that the regular expression never reads a long
// string.
func labelValueValid(v string) string {
	return fmt.Sprintf("(size(%[1]s) <= 63 && %[1]s.matches(%[2]s))", v, Lit(labelValueRE))
}

// parsesAsInt64 is a CEL condition on a valid label value v (so unsigned):
// strconv.ParseInt(v, 10, 64) succeeds, so that CEL's int(v), which parses
// the same way, cannot fail. Nineteen significant digits are compared with
// the largest int64 as strings of equal length.
func parsesAsInt64(v string) string {
	return fmt.Sprintf("(%[1]s.matches('^0*[0-9]{1,18}$') || %[1]s.matches('^0*[1-9][0-9]{18}$') && %[1]s.substring(size(%[1]s) - 19) <= '9223372036854775807')", v)
}

// Node is one constant node as CEL literals.
type Node struct {
	name string
	// labels is a CEL map literal of the node's labels.
	labels string
	// ints is a CEL map literal of the labels whose values parse as int64s
	// (what Gt and Lt compare), or "" when there are none.
	ints string
}

func NewNode(n *corev1.Node) Node {
	var labels, ints []string
	for _, k := range SortedKeys(n.Labels) {
		v := n.Labels[k]
		labels = append(labels, Lit(k)+": "+Lit(v))
		if i, err := strconv.ParseInt(v, 10, 64); err == nil {
			ints = append(ints, fmt.Sprintf("%s: %d", Lit(k), i))
		}
	}
	out := Node{name: n.Name, labels: "{" + strings.Join(labels, ", ") + "}"}
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

// PlacementTooLarge is a CEL condition on an object expression: its
// required node affinity has more terms or values than the engine judges
// (policy.MaxAffinityTerms, policy.MaxAffinityValues; coverage.SizeOf
// counts the values of match expressions and match fields).
func PlacementTooLarge(o string) string {
	guard, terms := requiredTerms(PodSpec(o))
	values := func(list string) string {
		return fmt.Sprintf("(has(t.%[1]s) ? t.%[1]s.map(r, has(r.values) ? size(r.values) : 0).sum() : 0)", list)
	}
	return fmt.Sprintf("(%[1]s && %[7]s && (size(%[2]s) > %[3]d || %[2]s.map(t, %[4]s + %[5]s).sum() > %[6]d))",
		guard, terms, policy.MaxAffinityTerms, values("matchExpressions"), values("matchFields"), policy.MaxAffinityValues, termsPresent(terms))
}

// ValidTerms is a CEL list on an object expression: for each required
// node affinity term, whether the scheduler can parse it and it has
// requirements (empty without a required node affinity). It is judged once
// per object, apart from the nodes, so that a long list of values is read
// once. Keys, operators and value counts are checked by the API server
// before admission; the counts and operators are checked here too, as they
// cost little, but not the keys (a regular expression per requirement
// would not fit the cost limit on the largest DaemonSets).
func ValidTerms(o string) string {
	guard, terms := requiredTerms(PodSpec(o))
	return fmt.Sprintf("(%s && %s ? %s.map(t, %s) : [])", guard, termsPresent(terms), terms, termValid("t"))
}

// termValid is a CEL condition: the node selector term t has requirements
// and each of them parses.
func termValid(t string) string {
	nonEmpty := fmt.Sprintf("(has(%[1]s.matchExpressions) && size(%[1]s.matchExpressions) > 0 || has(%[1]s.matchFields) && size(%[1]s.matchFields) > 0)", t)
	fields := fmt.Sprintf("(!has(%[1]s.matchFields) || %[1]s.matchFields.all(f, has(f.values) && size(f.values) == 1 && f.operator in ['In', 'NotIn']))", t)
	exprs := fmt.Sprintf("(!has(%[1]s.matchExpressions) || %[1]s.matchExpressions.all(r, %[2]s))", t, requirementValid("r"))
	return fmt.Sprintf("(%s && %s && %s)", nonEmpty, fields, exprs)
}

// requirementValid is a CEL condition: the match-expressions requirement r
// has a known operator, as many values as it takes, each a label value, and
// for Gt and Lt an integer.
func requirementValid(r string) string {
	one := r + ".values[0]"
	return fmt.Sprintf("(%[1]s.operator in ['In', 'NotIn'] ? has(%[1]s.values) && size(%[1]s.values) > 0 && %[1]s.values.all(v, %[2]s) : "+
		"%[1]s.operator in ['Exists', 'DoesNotExist'] ? !has(%[1]s.values) || size(%[1]s.values) == 0 : "+
		"%[1]s.operator in ['Gt', 'Lt'] && has(%[1]s.values) && size(%[1]s.values) == 1 && %[3]s && %[4]s)",
		r, labelValueValid("v"), labelValueValid(one), parsesAsInt64(one))
}

// ReachesNode is a CEL condition on an object expression: the pod spec's
// nodeName, nodeSelector and required node affinity select the node n.
// valid is the object's ValidTerms.
func ReachesNode(o, valid string, n Node) string {
	s := PodSpec(o)
	name := fmt.Sprintf("(!has(%[1]s.nodeName) || %[1]s.nodeName == '' || %[1]s.nodeName == %[2]s)", s, Lit(n.name))
	selector := fmt.Sprintf("(!has(%[1]s.nodeSelector) || %[1]s.nodeSelector.all(k, k in %[2]s && %[2]s[k] == %[1]s.nodeSelector[k]))", s, n.labels)
	guard, terms := requiredTerms(s)
	affinity := fmt.Sprintf("(!(%[1]s) || %[2]s && %[3]s.exists(i, t, %[4]s[i] && %[5]s))", guard, termsPresent(terms), terms, valid, termMatches("t", n))
	return fmt.Sprintf("(%s && %s && %s)", name, selector, affinity)
}

// termMatches is a CEL condition: the valid node selector term t matches n.
// Only metadata.name is a node field; any other key reads as empty, as in a
// fields.Set.
func termMatches(t string, n Node) string {
	field := "''"
	if n.name != "" {
		field = fmt.Sprintf("(f.key == 'metadata.name' ? %s : '')", Lit(n.name))
	}
	fields := fmt.Sprintf("(!has(%[1]s.matchFields) || %[1]s.matchFields.all(f, f.operator == 'In' ? %[2]s == f.values[0] : %[2]s != f.values[0]))", t, field)
	if n.name == "" {
		// A node without a name has no fields to match.
		fields = "true"
	}
	exprs := fmt.Sprintf("(!has(%[1]s.matchExpressions) || %[1]s.matchExpressions.all(r, %[2]s))", t, requirementMatches("r", n))
	return fmt.Sprintf("(%s && %s)", fields, exprs)
}

// requirementMatches is a CEL condition: the valid match-expressions
// requirement r holds for n's labels. Of a label n lacks, only NotIn and
// DoesNotExist hold.
func requirementMatches(r string, n Node) string {
	compare := "false"
	if n.ints != "" {
		compare = fmt.Sprintf("(%[1]s.key in %[2]s && (%[1]s.operator == 'Gt' ? %[2]s[%[1]s.key] > int(%[1]s.values[0]) : %[2]s[%[1]s.key] < int(%[1]s.values[0])))", r, n.ints)
	}
	return fmt.Sprintf("(%[1]s.key in %[2]s ? (%[1]s.operator == 'In' ? %[2]s[%[1]s.key] in %[1]s.values : "+
		"%[1]s.operator == 'NotIn' ? !(%[2]s[%[1]s.key] in %[1]s.values) : "+
		"%[1]s.operator == 'Exists' || %[1]s.operator != 'DoesNotExist' && %[3]s) : "+
		"%[1]s.operator in ['NotIn', 'DoesNotExist'])",
		r, n.labels, compare)
}

// TooLargeVar names the variable that holds PlacementTooLarge of o.
func TooLargeVar(o string) string { return o + "PlacementTooLarge" }

// ValidTermsVar names the variable that holds ValidTerms of o.
func ValidTermsVar(o string) string { return o + "ValidTerms" }
