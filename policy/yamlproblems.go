package policy

import "go.yaml.in/yaml/v3"

// YAMLProblems turns an error of go.yaml.in/yaml/v3's strict decoder into
// the problems a person reads, as the policy's own read ("line 4: unknown
// field "foo""), for the other documents dsguard decodes as strictly as its
// policy (the test files of dsguard test).
func YAMLProblems(err error) []ConfigProblem { return yamlProblems(err) }

// LineOf finds the line of a field path ("expect[2].rule") in a decoded
// document: the line of the deepest node of the path that exists, 0 when
// the document is empty.
func LineOf(root *yaml.Node, path string) int { return lineOf(root, path) }
