package vap

import (
	"fmt"
	"strings"

	"github.com/dsguard/dsguard/policy"
)

// check is one kind of finding of a rule, in CEL.
type check struct {
	// cap is the strongest action this kind of finding can have (the
	// webhook softens some findings by nature, e.g. a hostNetwork agent that
	// declares no ports only warns).
	cap policy.Action
	// violated is a CEL condition on an object expression ("object" or
	// "oldObject"): the object has a finding of this kind.
	violated func(o string) string
	// introduced is a CEL condition: the object has a finding of this kind
	// at a field where the old object has none (the webhook ratchets by
	// rule and field path).
	introduced string
	// message is a CEL string expression on object, one line: what the
	// webhook says, as far as CEL can say it.
	message string
	// variables are policy variables (name, expression) the expressions
	// above refer to as variables.<name>.
	variables [][2]string
}

// podSpec is the pod template's spec of an object expression.
func podSpec(o string) string { return o + ".spec.template.spec" }

// wholeObject makes a check whose finding sits at one fixed field, so that
// ratcheting compares the old object as a whole.
func wholeObject(cap policy.Action, violated func(o string) string, message string) check {
	return check{
		cap:        cap,
		violated:   violated,
		introduced: fmt.Sprintf("(%s && !(%s))", violated("object"), violated("oldObject")),
		message:    message,
	}
}

// perItem makes a check whose findings sit at items of nested lists (e.g.
// "spec.template.spec.containers" then "volumeMounts"); pred
// judges one item of the innermost list (item expression, object expression).
// Ratcheting compares the item at the same indexes in the old object.
func perItem(cap policy.Action, levels []string, pred func(item, o string) string, message string) check {
	violated := func(o string) string {
		return nestExists(o, levels, 0, func(item string, _ []string) string { return pred(item, o) })
	}
	introduced := nestExists("object", levels, 0, func(item string, idx []string) string {
		// The same place in the old object: every list long enough.
		var guards []string
		path := "oldObject"
		for i, l := range levels {
			guards = append(guards, fmt.Sprintf("has(%s.%s)", path, l), fmt.Sprintf("%s < size(%s.%s)", idx[i], path, l))
			path = fmt.Sprintf("%s.%s[%s]", path, l, idx[i])
		}
		return fmt.Sprintf("(%s && !(%s && %s))", pred(item, "object"), strings.Join(guards, " && "), pred(path, "oldObject"))
	})
	return check{cap: cap, violated: violated, introduced: introduced, message: message}
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
