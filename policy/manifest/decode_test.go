package manifest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const daemonSetYAML = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  namespace: monitoring
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
        - name: agent
          image: example/agent:v1
`

func decodeString(t *testing.T, input string) *Set {
	t.Helper()
	var s Set
	s.Decode("input.yaml", strings.NewReader(input))
	return &s
}

func TestSet_Decode(t *testing.T) {
	tests := []struct {
		name       string
		input      string
		daemonSets []string // names, in order
		nodes      int
		skipped    map[string]int
		errors     []string // substrings, one per expected error, in order
		ignored    bool     // the file holds YAML that is not a Kubernetes object
	}{
		{name: "one DaemonSet", input: daemonSetYAML, daemonSets: []string{"agent"}},
		{
			name:       "multi-document with other kinds and an empty document",
			input:      "# only a comment\n---\n" + daemonSetYAML + "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n",
			daemonSets: []string{"agent"},
			skipped:    map[string]int{"v1/Service": 1},
		},
		{
			name:       "JSON",
			input:      `{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"j"},"spec":{"selector":{"matchLabels":{"a":"j"}},"template":{"metadata":{"labels":{"a":"j"}},"spec":{"containers":[{"name":"c","image":"i:1"}]}}}}`,
			daemonSets: []string{"j"},
		},
		{
			name: "an API server's NodeList: one line, items without apiVersion and kind",
			input: `{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[` +
				`{"metadata":{"name":"n1","managedFields":[{"manager":"kubelet"}]},"status":{"images":[{"names":["a"]}]}},` +
				`{"metadata":{"name":"n2"}},{"apiVersion":"v1","kind":"Node","metadata":{"name":"n3"}}]}`,
			nodes: 3,
		},
		{
			name:    "an item naming a kind of its own in a NodeList is read as that kind",
			input:   `{"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"n1"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}]}`,
			nodes:   1,
			skipped: map[string]int{"v1/ConfigMap": 1},
		},
		{
			name:  "items of a plain List name their own kind; without one they are not Kubernetes",
			input: `{"apiVersion":"v1","items":[{"metadata":{"name":"n1"}},{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"}}],"kind":"List"}`,
			nodes: 1, ignored: true,
		},
		{
			name:   "JSON items in an object that is not a List",
			input:  `{"apiVersion":"v1","kind":"ConfigMap","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}]}`,
			nodes:  1,
			errors: []string{"ConfigMap has top-level items, read as a List's; only a List has them"},
		},
		{name: "a JSON array is not Kubernetes: ignored", input: `[1, 2, {"a": "b"}]`, ignored: true},
		{name: "invalid JSON names the document", input: `{"apiVersion": "v1", "kind": "List", "items": [{"a": }]}`, errors: []string{"input.yaml: document 1: not valid JSON"}},
		{name: "a Node whose field has the wrong type", input: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"spec":{"taints":"x"}}`, errors: []string{`Node: cannot unmarshal JSON string into Go []v1.Taint within "/spec/taints"`}},
		{
			name:    "concatenated JSON objects are documents",
			input:   `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}` + "\n" + `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}`,
			nodes:   1,
			skipped: map[string]int{"v1/Service": 1},
		},
		{name: "a YAML flow mapping is not taken for JSON", input: "{apiVersion: v1, kind: Node, metadata: {name: node-a}}\n", nodes: 1},
		{name: "a YAML 1.1 boolean where a name goes", input: "{apiVersion: v1, kind: Node, metadata: {name: n}}\n", errors: []string{`Node: cannot unmarshal JSON boolean into Go string within "/metadata/name"`}},
		{
			name: "List with DaemonSets and Nodes",
			input: "apiVersion: v1\nkind: List\nitems:\n" +
				"- {apiVersion: apps/v1, kind: DaemonSet, metadata: {name: a}, spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}}}}\n" +
				"- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n" +
				"- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n",
			daemonSets: []string{"a"}, nodes: 1, skipped: map[string]int{"v1/ConfigMap": 1},
		},
		{
			name:   "removed apiVersion apps/v1beta2",
			input:  strings.Replace(daemonSetYAML, "apps/v1", "apps/v1beta2", 1),
			errors: []string{"input.yaml: document 1: DaemonSet apiVersion apps/v1beta2 was removed in Kubernetes 1.16"},
		},
		{
			name:   "removed apiVersion extensions/v1beta1",
			input:  strings.Replace(daemonSetYAML, "apps/v1", "extensions/v1beta1", 1),
			errors: []string{"extensions/v1beta1 was removed"},
		},
		{
			name:       "unparseable YAML names the document",
			input:      daemonSetYAML + "---\nkind: [unclosed\n",
			errors:     []string{"input.yaml: document 2: not valid YAML"},
			daemonSets: []string{"agent"},
		},
		{
			name:   "misspelt field is an error, like kubectl's strict validation",
			input:  strings.Replace(daemonSetYAML, "containers:", "containres:", 1),
			errors: []string{`unknown field "spec.template.spec.containres"`},
		},
		{name: "scalar document is not Kubernetes: ignored", input: "just a string\n", ignored: true},
		{name: "values file is not Kubernetes: ignored", input: "replicaCount: 2\nimage: {tag: v1}\n", ignored: true},
		{name: "missing kind", input: "apiVersion: v1\nmetadata: {name: x}\n", errors: []string{"apiVersion and kind are both required"}},
		{
			name:   "DaemonSet without name or selector, as the API server would refuse it",
			input:  "apiVersion: apps/v1\nkind: DaemonSet\nspec: {template: {metadata: {labels: {a: b}}}}\n",
			errors: []string{"DaemonSet <no name>: the API server would refuse it: [metadata.name: Required value, spec.selector: Required value"},
		},
		{
			name:   "selector not matching the template labels",
			input:  strings.Replace(daemonSetYAML, "labels: {app: agent}", "labels: {app: other}", 1),
			errors: []string{"DaemonSet monitoring/agent: the API server would refuse it: spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"},
		},
		{
			name:   "empty selector",
			input:  strings.Replace(daemonSetYAML, "matchLabels: {app: agent}", "matchLabels: {}", 1),
			errors: []string{"empty selector is invalid"},
		},
		{name: "kind not a string", input: "apiVersion: v1\nkind: [a]\n", errors: []string{"must be strings"}},
		{
			name:   "List nested too deep",
			input:  "{apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: List, items: []}]}]}]}]}",
			errors: []string{"nested more than 4 deep"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := decodeString(t, tt.input)
			var names []string
			for _, d := range s.DaemonSets {
				names = append(names, d.DaemonSet.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.daemonSets, ",") {
				t.Errorf("DaemonSets = %v, want %v", names, tt.daemonSets)
			}
			if len(s.Nodes) != tt.nodes {
				t.Errorf("Nodes = %d, want %d", len(s.Nodes), tt.nodes)
			}
			if len(s.Skipped) != len(tt.skipped) {
				t.Errorf("Skipped = %v, want %v", s.Skipped, tt.skipped)
			}
			for k, v := range tt.skipped {
				if s.Skipped[k] != v {
					t.Errorf("Skipped[%s] = %d, want %d", k, s.Skipped[k], v)
				}
			}
			if got := len(s.Ignored) > 0; got != tt.ignored {
				t.Errorf("Ignored = %v, want ignored %v", s.Ignored, tt.ignored)
			}
			if len(s.Errors) != len(tt.errors) {
				t.Fatalf("errors = %v, want %d matching %q", s.Errors, len(tt.errors), tt.errors)
			}
			for i, want := range tt.errors {
				if !strings.Contains(s.Errors[i].Error(), want) {
					t.Errorf("error %d = %q, want it to contain %q", i, s.Errors[i].Error(), want)
				}
			}
		})
	}
}

func TestSet_Decode_ListItemLocation(t *testing.T) {
	s := decodeString(t, "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n- {apiVersion: apps/v1beta2, kind: DaemonSet}\n")
	if len(s.Errors) != 1 || s.Errors[0].Location != (Location{File: "input.yaml", Document: 1, Item: 2, Line: 5}) {
		t.Fatalf("errors = %v, want one at document 1 item 2, line 5 (where the item starts)", s.Errors)
	}
	if got := s.Errors[0].Location.String(); got != "input.yaml: document 1, item 2" {
		t.Errorf("Location.String() = %q", got)
	}
}

func TestSet_Load(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", daemonSetYAML)
	write("nested/b.yml", strings.Replace(daemonSetYAML, "name: agent", "name: b", 1))
	write("nested/c.json", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}`)
	write("notes.txt", "not a manifest: skipped when walking")
	write(".git/d.yaml", strings.Replace(daemonSetYAML, "name: agent", "name: hidden", 1))

	var s Set
	if err := s.Load([]string{dir, "-"}, strings.NewReader(strings.Replace(daemonSetYAML, "name: agent", "name: stdin", 1))); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range s.DaemonSets {
		names = append(names, d.DaemonSet.Name)
	}
	if got := strings.Join(names, ","); got != "agent,b,stdin" {
		t.Errorf("DaemonSets = %s, want agent,b,stdin", got)
	}
	if s.Files != 4 || s.SkippedTotal() != 1 {
		t.Errorf("Files = %d, skipped = %d; want 4 and 1", s.Files, s.SkippedTotal())
	}
	if s.DaemonSets[2].Location.File != "-" {
		t.Errorf("stdin location = %q, want -", s.DaemonSets[2].Location.File)
	}

	// A file named explicitly is read whatever its extension.
	var one Set
	if err := one.Load([]string{filepath.Join(dir, "notes.txt")}, nil); err != nil {
		t.Fatal(err)
	}
	if len(one.Ignored) != 1 || len(one.Errors) != 0 {
		t.Errorf("explicit notes.txt: ignored %v, errors %v; want it ignored as not Kubernetes", one.Ignored, one.Errors)
	}

	if err := new(Set).Load([]string{filepath.Join(dir, "missing.yaml")}, nil); err == nil {
		t.Error("missing path: want an error")
	}
}

// countingReader writes a NodeList of n nodes as it is read and counts the
// bytes it has handed out.
type countingReader struct {
	n, next int
	pending []byte
	read    int
}

func (c *countingReader) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		switch {
		case c.next == 0:
			c.pending = []byte(`{"kind":"NodeList","apiVersion":"v1","items":[`)
		case c.next <= c.n:
			sep := ","
			if c.next == 1 {
				sep = ""
			}
			c.pending = fmt.Appendf(nil, `%s{"metadata":{"name":"node-%d","labels":{"pool":"a"}},"status":{"images":[{"names":["%s"]}]}}`,
				sep, c.next, strings.Repeat("x", 2000))
		case c.next == c.n+1:
			c.pending = []byte("]}")
		default:
			return 0, io.EOF
		}
		c.next++
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	c.read += n
	return n, nil
}

// TestReader_StreamsJSONLists: each node of a one-line NodeList (40 MB) is
// handed on while the input has been read a bounded distance past it.
func TestReader_StreamsJSONLists(t *testing.T) {
	const nodes = 20000
	in := &countingReader{n: nodes}
	seen := 0
	rd := &Reader{OnNode: func(n *corev1.Node) {
		seen++
		if want := fmt.Sprintf("node-%d", seen); n.Name != want {
			t.Fatalf("node %d is %s, want %s", seen, n.Name, want)
		}
		// Item k ends at about k times its size; the reader may be
		// ahead of it by its buffers (64 KiB, and the decoder's).
		if ahead := in.read - seen*2100; ahead > 1<<20 {
			t.Fatalf("node %d handed on with %d bytes read past it", seen, ahead)
		}
	}}
	rd.Decode("nodes.json", in)
	if len(rd.Errors) > 0 || seen != nodes {
		t.Fatalf("%d nodes handed on of %d, errors %v", seen, nodes, rd.Errors)
	}
}

// TestLineTracker_Positions: a value's line and column in the file, on one
// line or many, and after the bytes before it were forgotten.
func TestLineTracker_Positions(t *testing.T) {
	input := "{\"a\": 1,\n  \"b\": [\n    {\"x\": 2}, {\"y\": 3}\n  ]\n}\n"
	tr := &lineTracker{r: strings.NewReader(input), line: 1}
	if _, err := io.ReadAll(tr); err != nil {
		t.Fatal(err)
	}
	at := func(sub string) int64 { return int64(strings.Index(input, sub)) }
	for _, tt := range []struct {
		sub          string
		line, column int
	}{{`{"a"`, 1, 1}, {`"b"`, 2, 3}, {`{"x"`, 3, 5}, {`{"y"`, 3, 15}, {"]", 4, 3}} {
		if line, column := tr.position(at(tt.sub)); line != tt.line || column != tt.column {
			t.Errorf("position of %q = %d:%d, want %d:%d", tt.sub, line, column, tt.line, tt.column)
		}
	}
	tr.forget(at(`{"y"`))
	if line, column := tr.position(at(`{"y"`)); line != 3 || column != 15 {
		t.Errorf("after forget: %d:%d, want 3:15", line, column)
	}
	if line, column := tr.position(at("]")); line != 4 || column != 3 {
		t.Errorf("after forget: ] at %d:%d, want 4:3", line, column)
	}
	if want := len(input) - int(at(`{"y"`)); len(tr.kept) != want {
		t.Errorf("kept %d bytes after forget, want %d", len(tr.kept), want)
	}
}

// The JSON decoder words its errors "cannot" or "unable to" at random per
// process; a user's message (and a test's expectation) must not change with it.
func TestJSONError_OneWording(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"json: unable to unmarshal JSON string into Go string", "json: cannot unmarshal JSON string into Go string"},
		{"json: cannot unmarshal JSON string into Go string", "json: cannot unmarshal JSON string into Go string"},
		{"jsontext: invalid character 'x' at start of value", "invalid character 'x' at start of value"},
	} {
		if got := jsonError(errors.New(tc.in)); got != tc.want {
			t.Errorf("jsonError(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
