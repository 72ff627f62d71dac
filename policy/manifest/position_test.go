package manifest

import (
	"io"
	"strings"
	"testing"
)

func TestDocuments_Lines(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []int // first line of each document
	}{
		{name: "one document", input: "a: 1\nb: 2\n", want: []int{1}},
		{name: "leading separator", input: "---\na: 1\n---\nb: 2\n", want: []int{2, 4}},
		{name: "separator with comment, no final newline", input: "a: 1\n--- # next\nb: 2", want: []int{1, 3}},
		{name: "empty documents keep their place", input: "a: 1\n---\n---\nb: 2\n", want: []int{1, 3, 4}},
		{name: "a line starting with --- that is not a separator", input: "a: 1\n---x: 2\n", want: []int{1}},
		{name: "line longer than the buffer", input: "a: " + strings.Repeat("x", 200<<10) + "\n---\nb: 1\n", want: []int{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDocuments(strings.NewReader(tt.input))
			var got []int
			for {
				p, err := d.next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p.line)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("lines = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("lines = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// positioned is a second document whose fields sit at known places.
const positioned = `# a comment
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: positioned
  annotations:
    exempt.dsguard.io/privileged: "legacy"
spec:
  selector:
    matchLabels: {app: p}
  updateStrategy:
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  template:
    metadata:
      labels: {app: p}
    spec:
      tolerations:
      containers:
        - name: a
          image: example/a:v1
        - name: b
          image: example/b
          ports:
            - containerPort: 9100
              hostPort: 9100
`

func TestDaemonSet_Position(t *testing.T) {
	var s Set
	s.Decode("ds.yaml", strings.NewReader(daemonSetYAML+"---\n"+positioned))
	if len(s.DaemonSets) != 2 || len(s.Errors) > 0 {
		t.Fatalf("decoded %d DaemonSets, errors %v", len(s.DaemonSets), s.Errors)
	}
	d := s.DaemonSets[1]
	offset := strings.Count(daemonSetYAML, "\n") + 1 // the first document and the separator
	tests := []struct {
		path         string
		line, column int
	}{
		{"spec.template.spec.containers[1].ports[0].hostPort", 27, 25},
		{"spec.updateStrategy.rollingUpdate.maxSurge", 13, 17},
		{"spec.template.spec.containers[1].image", 24, 18},
		{"metadata.annotations[exempt.dsguard.io/privileged]", 7, 35},
		// An empty value points at its key; an absent field at its parent.
		{"spec.template.spec.tolerations", 19, 7},
		{"spec.template.spec.containers[1].readinessProbe", 23, 11},
		{"spec.template.spec.nodeSelector", 19, 7},
	}
	for _, tt := range tests {
		got := d.Position(tt.path)
		if got.Line != tt.line+offset || got.Column != tt.column {
			t.Errorf("Position(%s) = %d:%d, want %d:%d", tt.path, got.Line, got.Column, tt.line+offset, tt.column)
		}
	}

	// A List item is found inside its List; JSON has lines too.
	var l Set
	l.Decode("list.json", strings.NewReader("{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n"+
		`{"apiVersion": "v1", "kind": "ConfigMap"},`+"\n"+
		`{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "j"}, "spec": {"selector": {"matchLabels": {"a": "j"}},`+"\n"+
		`  "template": {"metadata": {"labels": {"a": "j"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}]}`+"\n"))
	if len(l.DaemonSets) != 1 {
		t.Fatalf("List: %d DaemonSets, errors %v", len(l.DaemonSets), l.Errors)
	}
	if got := l.DaemonSets[0].Position("spec.template.spec.containers[0].image"); got != (Position{Line: 4, Column: 99}) {
		t.Errorf("List item position = %+v, want 4:99", got)
	}
	if got := (&DaemonSet{}).Position("spec"); got != (Position{}) {
		t.Errorf("no document: %+v, want zero", got)
	}
}

func TestSplitPath(t *testing.T) {
	got := strings.Join(splitPath("metadata.annotations[exempt.dsguard.io/x].y[0][k]"), "|")
	if want := "metadata|annotations|exempt.dsguard.io/x|y|0|k"; got != want {
		t.Errorf("splitPath = %s, want %s", got, want)
	}
}
