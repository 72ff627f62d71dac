package manifest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// asList writes documents as one List the way kubectl get -o yaml does,
// with the items' "- " at indent.
func asList(docs [][]byte, indent int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nitems:\n")
	pad := strings.Repeat(" ", indent)
	for _, d := range docs {
		for i, line := range strings.SplitAfter(strings.TrimRight(string(d), "\n")+"\n", "\n") {
			switch {
			case line == "":
			case i == 0:
				b.WriteString(pad + "- " + line)
			case strings.TrimSpace(line) == "":
				b.WriteString("\n")
			default:
				b.WriteString(pad + "  " + line)
			}
		}
	}
	b.WriteString("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
	return b.String()
}

// TestDecode_StreamedListsMatchTheDocuments: every DaemonSet fixture of the
// rules, written as one List with kubectl's indentation and with the items
// indented, decodes to the same objects as the fixtures read one by one,
// and each object's fields are found on the lines where the List holds them.
func TestDecode_StreamedListsMatchTheDocuments(t *testing.T) {
	files, err := filepath.Glob("../rules/testdata/rules/*/*/*.yaml")
	if err != nil || len(files) < 20 {
		t.Fatalf("fixtures: %d, %v", len(files), err)
	}
	var docs [][]byte
	var want []*appsv1.DaemonSet
	for _, f := range files {
		if filepath.Base(f) == expectFileName {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s Set
		s.Decode(f, bytes.NewReader(b))
		if len(s.Errors) > 0 || len(s.DaemonSets) != 1 || bytes.Contains(b, []byte("\n---")) {
			continue // not one DaemonSet per file
		}
		docs = append(docs, b)
		want = append(want, s.DaemonSets[0].DaemonSet)
	}
	if len(docs) < 20 {
		t.Fatalf("only %d single-DaemonSet fixtures", len(docs))
	}
	jsonList := func() string {
		var b bytes.Buffer
		lw, err := NewListWriter(&b, "json")
		if err != nil {
			t.Fatal(err)
		}
		for _, ds := range want {
			if err := lw.Write(ds); err != nil {
				t.Fatal(err)
			}
		}
		if err := lw.Close(); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}()
	for _, indent := range []int{0, 2, -1} {
		name := fmt.Sprintf("items at indent %d", indent)
		if indent < 0 {
			name = "JSON, as kubectl get -o json writes it"
		}
		t.Run(name, func(t *testing.T) {
			list := jsonList
			if indent >= 0 {
				list = asList(docs, indent)
			}
			// The same List read whole, as a YAML library reads it.
			var whole struct{ Items []appsv1.DaemonSet }
			if err := yaml.Unmarshal([]byte(list), &whole); err != nil {
				t.Fatal(err)
			}
			var s Set
			s.Decode("list.yaml", strings.NewReader(list))
			if len(s.Errors) > 0 {
				t.Fatalf("errors: %v", s.Errors)
			}
			if len(s.DaemonSets) != len(want) {
				t.Fatalf("%d DaemonSets, want %d", len(s.DaemonSets), len(want))
			}
			lines := strings.Split(list, "\n")
			for i, d := range s.DaemonSets {
				if !reflect.DeepEqual(d.DaemonSet, want[i]) || !reflect.DeepEqual(*d.DaemonSet, whole.Items[i]) {
					t.Fatalf("item %d (%s) decodes differently when streamed", i+1, files[i])
				}
				// Streamed: each item's Location.Line is its own.
				if d.Location.Item != i+1 || d.Location.Document != 1 || d.Location.Line < 3 {
					t.Errorf("item %d: location %+v", i+1, d.Location)
				}
				p := d.Position("metadata.name")
				if p.Line < 1 || p.Line > len(lines) {
					t.Fatalf("item %d: metadata.name at %+v", i+1, p)
				}
				at := lines[p.Line-1]
				if p.Column < 1 || !strings.HasPrefix(at[p.Column-1:], d.DaemonSet.Name) && !strings.HasPrefix(at[p.Column-1:], `"`+d.DaemonSet.Name) {
					t.Errorf("item %d: metadata.name found at %d:%d, %q", i+1, p.Line, p.Column, at)
				}
			}
		})
	}
}

// expectFileName is the fixtures' expectation file, no manifest.
const expectFileName = "expect.yaml"

func TestDecode_StreamedListEdges(t *testing.T) {
	const ds = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: %s}\nspec:\n  selector: {matchLabels: {a: b}}\n" +
		"  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers:\n      - name: c\n        image: i:v1\n        args:\n        - |\n          #!/bin/sh\n\n          # not a YAML comment: the script's\n          exec agent\n"
	script := "#!/bin/sh\n\n# not a YAML comment: the script's\nexec agent\n"
	tests := []struct {
		name   string
		input  string
		names  []string
		errors int
	}{
		{"comments and blank lines between items", "apiVersion: v1\nitems:\n# first\n\n" + indentItem(fmt.Sprintf(ds, "a")) + "# second\n\n" +
			indentItem(fmt.Sprintf(ds, "b")) + "kind: List\n", []string{"a", "b"}, 0},
		{"two Lists and a DaemonSet apart", asList([][]byte{[]byte(fmt.Sprintf(ds, "a"))}, 0) + "---\n" + fmt.Sprintf(ds, "b") +
			"---\n" + asList([][]byte{[]byte(fmt.Sprintf(ds, "c")), []byte(fmt.Sprintf(ds, "d"))}, 2), []string{"a", "b", "c", "d"}, 0},
		{"an empty List", "apiVersion: v1\nitems: []\nkind: List\n", nil, 0},
		{"items with no value", "apiVersion: v1\nitems:\nkind: List\n", nil, 0},
		{"an entry alone on its line", "apiVersion: v1\nitems:\n-\n  " + strings.ReplaceAll(fmt.Sprintf(ds, "a"), "\n", "\n  ") + "\nkind: List\n", []string{"a"}, 0},
		{"items in a document that is no List", "apiVersion: v1\nkind: ConfigMap\nitems:\n- " + strings.ReplaceAll(fmt.Sprintf(ds, "a"), "\n", "\n  ") + "\n", []string{"a"}, 1},
		{"no Kubernetes at all: a list of settings under items", "items:\n- name: a\n  value: 1\n- name: b\nother: x\n", nil, 0},
		{"the List's end at the end of the stream", "apiVersion: v1\nkind: List\nitems:\n" + indentItem(fmt.Sprintf(ds, "a")), []string{"a"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := decodeString(t, tt.input)
			var names []string
			for _, d := range s.DaemonSets {
				names = append(names, d.DaemonSet.Name)
				if got := d.DaemonSet.Spec.Template.Spec.Containers[0].Args[0]; got != script {
					t.Errorf("%s: the block scalar came out as %q, want %q", d.DaemonSet.Name, got, script)
				}
			}
			if !reflect.DeepEqual(names, tt.names) || len(s.Errors) != tt.errors {
				t.Errorf("DaemonSets %v, errors %v; want %v and %d errors", names, s.Errors, tt.names, tt.errors)
			}
		})
	}
}

// indentItem writes one document as a List item at indent 0.
func indentItem(doc string) string {
	list := strings.TrimPrefix(asList([][]byte{[]byte(doc)}, 0), "apiVersion: v1\nitems:\n")
	return strings.TrimSuffix(list, "kind: List\nmetadata:\n  resourceVersion: \"\"\n")
}

// TestListWriter_ReadBack: what ListWriter writes, in both formats and
// empty, the Reader reads back object for object.
func TestListWriter_ReadBack(t *testing.T) {
	var want []*appsv1.DaemonSet
	for _, name := range []string{"a", "b", "c"} {
		var s Set
		s.Decode("x.yaml", strings.NewReader(strings.Replace(daemonSetYAML, "name: agent\n", "name: "+name+"\n", 1)))
		want = append(want, s.DaemonSets[0].DaemonSet)
	}
	for _, format := range []string{"yaml", "json"} {
		for _, n := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("%s, %d items", format, n), func(t *testing.T) {
				var b bytes.Buffer
				lw, err := NewListWriter(&b, format)
				if err != nil {
					t.Fatal(err)
				}
				for _, ds := range want[:n] {
					if err := lw.Write(ds); err != nil {
						t.Fatal(err)
					}
				}
				if err := lw.Close(); err != nil {
					t.Fatal(err)
				}
				var s Set
				s.Decode("list."+format, &b)
				if len(s.Errors) > 0 || len(s.DaemonSets) != n {
					t.Fatalf("read back %d DaemonSets, errors %v:\n%s", len(s.DaemonSets), s.Errors, b.String())
				}
				for i, d := range s.DaemonSets {
					if !reflect.DeepEqual(d.DaemonSet, want[i]) {
						t.Errorf("item %d differs", i)
					}
				}
			})
		}
	}
	if _, err := NewListWriter(io.Discard, "xml"); err == nil {
		t.Error("format xml accepted")
	}
}
