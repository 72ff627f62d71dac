package celform

import (
	"fmt"

	"github.com/dsguard/dsguard/policy"
)

// PodSpec is the pod template's spec of an object expression.
func PodSpec(o string) string { return o + ".spec.template.spec" }

// WholeObject makes a check whose finding sits at one fixed field, so that
// ratcheting compares the old object as a whole.
func WholeObject(cap policy.Action, violated func(o string) string, message string) policy.CELCheck {
	return policy.CELCheck{
		Cap:        cap,
		Violated:   violated,
		Introduced: fmt.Sprintf("(%s && !(%s))", violated("object"), violated("oldObject")),
		Message:    message,
	}
}

// PerItem makes a check whose findings sit at items of nested lists (e.g.
// "spec.template.spec.containers" then "volumeMounts"); pred
// judges one item of the innermost list (item expression, object expression).
// Ratcheting compares the item at the same indexes in the old object.
func PerItem(cap policy.Action, levels []string, pred func(item, o string) string, message string) policy.CELCheck {
	violated := func(o string) string {
		return nestExists(o, levels, 0, func(item string, _ []string) string { return pred(item, o) })
	}
	return policy.CELCheck{Cap: cap, Violated: violated, Introduced: introducedAt("object", "oldObject", levels, 0, pred), Message: message}
}

// introducedAt is a CEL condition: an item under parent, at levels[depth:],
// has a finding that the item at the same indexes under oldParent lacks.
// Each old list is bound once per item of the level above (CEL has no let:
// a one-element list binds it), so that judging an item costs an index, not
// a walk down the old object from its root.
func introducedAt(parent, oldParent string, levels []string, depth int, pred func(item, o string) string) string {
	list, oldList := parent+"."+levels[depth], fmt.Sprintf("old%d", depth)
	i, x := fmt.Sprintf("i%d", depth), fmt.Sprintf("x%d", depth)
	var inner string
	if depth == len(levels)-1 {
		inner = fmt.Sprintf("(%s && !(%s < size(%s) && %s))", pred(x, "object"), i, oldList, pred(fmt.Sprintf("%s[%s]", oldList, i), "oldObject"))
	} else {
		inner = introducedAt(x, fmt.Sprintf("%s[%s]", oldList, i), levels, depth+1, pred)
		inner = fmt.Sprintf("(%s < size(%s) ? %s : %s)", i, oldList, inner, nestExists(x, levels, depth+1, func(item string, _ []string) string { return pred(item, "object") }))
	}
	return fmt.Sprintf("(has(%[1]s) && [has(%[2]s.%[3]s) ? %[2]s.%[3]s : []].exists(%[4]s, %[1]s.exists(%[5]s, %[6]s, %[7]s)))",
		list, oldParent, levels[depth], oldList, i, x, inner)
}

// nestExists renders nested exists() over levels; body gets the innermost
// item variable and the index variables of every level.
func nestExists(parent string, levels []string, depth int, body func(item string, idx []string) string) string {
	return nestExistsIdx(parent, levels, depth, nil, body)
}

func nestExistsIdx(parent string, levels []string, depth int, idx []string, body func(string, []string) string) string {
	item := fmt.Sprintf("x%d", depth)
	i := fmt.Sprintf("i%d", depth)
	list := parent + "." + levels[depth]
	idx = append(append([]string(nil), idx...), i)
	var inner string
	if depth == len(levels)-1 {
		inner = body(item, idx)
	} else {
		inner = nestExistsIdx(item, levels, depth+1, idx, body)
	}
	return fmt.Sprintf("(has(%s) && %s.exists(%s, %s, %s))", list, list, i, item, inner)
}
