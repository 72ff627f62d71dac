package manifest

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder: it must never panic, and
// every document must end up as exactly one of DaemonSet, Node, skipped,
// empty or error.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		daemonSetYAML,
		"---\n---\n",
		"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: apps/v1, kind: DaemonSet}\n",
		// kubectl's List, streamed item by item; items indented, a comment
		// and a blank line between them.
		"apiVersion: v1\nitems:\n- apiVersion: apps/v1\n  kind: DaemonSet\n  metadata: {name: a}\n# c\n\n- apiVersion: v1\n  kind: Node\nkind: List\n",
		"apiVersion: v1\nitems:\n  -\n    apiVersion: v1\n    kind: Pod\n  - |\n    text\n---\nitems:\n  a: b\n",
		`{"apiVersion":"apps/v1","kind":"DaemonSet","spec":{"updateStrategy":{"rollingUpdate":{"maxSurge":"10%"}}}}`,
		// JSON read token by token: an API server's NodeList on one line,
		// kubectl's List with a DaemonSet whose fields are located.
		`{"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"a","labels":{"x":"y"}},"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}},{"apiVersion":"v1","kind":"Pod"}]}`,
		"{\n  \"apiVersion\": \"v1\",\n  \"items\": [\n    {\"apiVersion\": \"apps/v1\", \"kind\": \"DaemonSet\", \"metadata\": {\"name\": \"d\"}}\n  ],\n  \"kind\": \"List\"\n}\n",
		"apiVersion: apps/v1beta2\nkind: DaemonSet\n",
		"kind: [\n",
		"- a\n- b\n",
		"apiVersion: apps/v1\nkind: DaemonSet\nspec: {template: {spec: {containers: 5}}}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Set
		s.Decode("fuzz.yaml", bytes.NewReader(data))
		for _, d := range s.DaemonSets {
			if d.DaemonSet == nil {
				t.Fatal("nil DaemonSet decoded")
			}
			// A position is found in the text kept, or is zero.
			_ = d.Position("spec.template.spec.containers[0].image")
		}
		for _, e := range s.Errors {
			if e.Error() == "" {
				t.Fatal("empty error message")
			}
		}
	})
}
