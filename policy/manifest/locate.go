package manifest

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Position is a line and column in a file, both 1-based; zero when unknown.
type Position struct {
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// locate finds the field named by path (a field.Path string such as
// "spec.template.spec.containers[0].ports[1].hostPort" or
// "metadata.annotations[exempt.dsguard.io/privileged]") in a YAML or JSON
// document. A field that is absent (a missing toleration list) resolves to
// its nearest present ancestor, which is where the fix goes. item, when not
// zero, first selects that 1-based entry of a List's items. firstLine is the
// document's first line in its file. The document is parsed here, on demand:
// most DaemonSets have no finding and never pay for it.
func locate(doc []byte, firstLine, item int, path string) Position {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil || root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return Position{}
	}
	n := root.Content[0]
	if item > 0 {
		if items := child(mappingValue(n, "items"), strconv.Itoa(item-1)); items != nil {
			n = items
		}
	}
	for _, seg := range splitPath(path) {
		next := child(n, seg)
		if next == nil {
			break
		}
		n = next
	}
	return Position{Line: n.Line + firstLine - 1, Column: n.Column}
}

// child returns the value under a mapping key, or the element at an index of
// a sequence; nil when there is none.
func child(n *yaml.Node, seg string) *yaml.Node {
	if n == nil {
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		return mappingValue(n, seg)
	case yaml.SequenceNode:
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i >= len(n.Content) {
			return nil
		}
		return n.Content[i]
	}
	return nil
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode && v.Alias != nil {
				return v.Alias
			}
			// An empty value ("tolerations:") has no place of its
			// own worth pointing at: the key is where it is written.
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				return n.Content[i]
			}
			return v
		}
	}
	return nil
}

// splitPath turns a field.Path string into its segments: "a.b[0].c[k.e/y]"
// gives a, b, 0, c, k.e/y. Dots inside brackets belong to the key.
func splitPath(path string) []string {
	var segs []string
	var cur strings.Builder
	depth := 0
	flush := func() {
		if cur.Len() > 0 {
			segs = append(segs, cur.String())
			cur.Reset()
		}
	}
	for _, r := range path {
		switch {
		case r == '[' && depth == 0:
			flush()
			depth++
		case r == ']' && depth == 1:
			flush()
			depth--
		case r == '.' && depth == 0:
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return segs
}
