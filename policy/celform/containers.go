package celform

import (
	"fmt"
	"strings"

	"github.com/dsguard/dsguard/policy"
)

// ContainerLists are the pod spec's container lists, as the webhook walks them.
var ContainerLists = []string{"initContainers", "containers"}

// RunsAlongside is a CEL condition on a container of list: it runs for the
// Pod's whole life (every regular container and every native sidecar).
func RunsAlongside(list, c string) string {
	if list == "containers" {
		return "true"
	}
	return fmt.Sprintf("(has(%[1]s.restartPolicy) && %[1]s.restartPolicy == 'Always')", c)
}

// Noun is a CEL string naming a container of list for a message.
func Noun(list, c string) string {
	if list == "containers" {
		return "'container'"
	}
	return fmt.Sprintf("(%s ? 'sidecar' : 'init container')", RunsAlongside(list, c))
}

// ContainerCheck is a per-container check with a message naming the first
// offending container; text and fix render parts of the message from the
// container expression. The list is walked once for the message: the first
// offending index is bound with a one-element list (CEL has no let), so the
// container expression is a plain index, however often the message uses it.
func ContainerCheck(rule, list, field string, pred func(c, o string) string, text func(c string) string, fix func(c string) string) policy.CELCheck {
	l := PodSpec("object") + "." + list
	const c = "c"
	body := strings.Join([]string{
		Lit("[" + rule + "] spec.template.spec." + list + "["), "string(i)", Lit("]" + field + ": "),
		Noun(list, c), `' "' + ` + c + `.name + '" '`, text(c), "'; fix: '", fix(c),
	}, " + ")
	msg := func(first string) string {
		return fmt.Sprintf("[%[1]s.transformList(i, x, %[2]s, i)[0]].map(i, [%[1]s[i]].map(c, %[3]s)[0])[0]", l, first, body)
	}
	check := PerItem(policy.ActionDeny, []string{"spec.template.spec." + list}, pred, msg(pred("x", "object")))
	// On an update, the first container whose finding the old object's
	// container at the same index lacks: the one the ratcheted deny is for.
	old := PodSpec("oldObject") + "." + list
	check.IntroducedMessage = msg(fmt.Sprintf("(%s && !(oldObject != null && has(%s) && i < size(%s) && %s))",
		pred("x", "object"), old, old, pred(old+"[i]", "oldObject")))
	return check
}

// RollingValue renders maxSurge or maxUnavailable (name) of o as CEL: an
// int, or a percentage string. The API server has validated both before
// admission, so a string is "N%". present is a condition: the rolling
// update sets it; positive: it is above zero; text: it as the manifest
// writes it, for messages.
func RollingValue(o, name string) (present, positive, text string) {
	ru := o + ".spec.updateStrategy.rollingUpdate"
	v := ru + "." + name
	rolling := fmt.Sprintf("(!has(%[1]s.spec.updateStrategy) || !has(%[1]s.spec.updateStrategy.type) || %[1]s.spec.updateStrategy.type == 'RollingUpdate')", o)
	present = fmt.Sprintf("(%s && has(%s.spec.updateStrategy.rollingUpdate) && has(%s))", rolling, o, v)
	positive = fmt.Sprintf("(type(%[1]s) == int ? %[1]s > 0 : int(string(%[1]s).replace('%%', '')) > 0)", v)
	text = fmt.Sprintf("(type(%[1]s) == int ? string(%[1]s) : '\"' + string(%[1]s) + '\"')", v)
	return present, positive, text
}
