package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Location names where an object came from.
type Location struct {
	// File is the path as given, or "-" for standard input.
	File string `json:"file"`
	// Document is the 1-based position of the YAML document in the file.
	Document int `json:"document"`
	// Item is the 1-based position inside a List object, 0 when not in a List.
	Item int `json:"item,omitempty"`
}

func (l Location) String() string {
	s := fmt.Sprintf("%s: document %d", l.File, l.Document)
	if l.Item > 0 {
		s += fmt.Sprintf(", item %d", l.Item)
	}
	return s
}

// DaemonSet is a decoded DaemonSet and where it came from.
type DaemonSet struct {
	Location  Location
	DaemonSet *appsv1.DaemonSet
}

// Error is a document that could not be used.
type Error struct {
	Location Location
	Err      error
}

func (e *Error) Error() string { return e.Location.String() + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Set accumulates what was read from any number of sources.
type Set struct {
	DaemonSets []DaemonSet
	Nodes      []*corev1.Node
	// Skipped counts objects of other kinds, by "apiVersion/kind".
	Skipped map[string]int
	Errors  []*Error
	// Files counts the sources read.
	Files int
}

// SkippedTotal returns the number of objects skipped.
func (s *Set) SkippedTotal() int {
	n := 0
	for _, c := range s.Skipped {
		n += c
	}
	return n
}

// removedDaemonSetVersions were served once and are gone since Kubernetes 1.16.
var removedDaemonSetVersions = map[string]bool{
	"extensions/v1beta1": true,
	"apps/v1beta1":       true,
	"apps/v1beta2":       true,
}

// maxListDepth bounds List nesting, so a crafted document cannot recurse deeply.
const maxListDepth = 4

// Decode reads every document from r, attributing them to file.
func (s *Set) Decode(file string, r io.Reader) {
	s.Files++
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for doc := 1; ; doc++ {
		data, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		loc := Location{File: file, Document: doc}
		if err != nil {
			s.fail(loc, fmt.Errorf("cannot read: %w", err))
			return
		}
		jsonData, err := yaml.YAMLToJSON(data)
		if err != nil {
			s.fail(loc, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: yaml: ")))
			continue
		}
		s.decodeObject(loc, jsonData, 0)
	}
}

func (s *Set) fail(loc Location, err error) {
	s.Errors = append(s.Errors, &Error{Location: loc, Err: err})
}

func (s *Set) decodeObject(loc Location, data []byte, depth int) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return // an empty document, e.g. only comments
	}
	if trimmed[0] != '{' {
		s.fail(loc, errors.New("not a Kubernetes object (expected a mapping with apiVersion and kind)"))
		return
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(trimmed, &tm); err != nil {
		s.fail(loc, fmt.Errorf("apiVersion and kind must be strings: %v", err))
		return
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		s.fail(loc, errors.New("not a Kubernetes object: apiVersion and kind are required"))
		return
	}
	switch {
	case tm.Kind == "DaemonSet" && tm.APIVersion == "apps/v1":
		var ds appsv1.DaemonSet
		if err := strictUnmarshal(trimmed, &ds); err != nil {
			s.fail(loc, fmt.Errorf("DaemonSet: %w", err))
			return
		}
		s.DaemonSets = append(s.DaemonSets, DaemonSet{Location: loc, DaemonSet: &ds})
	case tm.Kind == "DaemonSet" && removedDaemonSetVersions[tm.APIVersion]:
		s.fail(loc, fmt.Errorf("DaemonSet apiVersion %s was removed in Kubernetes 1.16; "+
			"change it to apps/v1 (which also requires spec.selector to match the template labels)", tm.APIVersion))
	case tm.Kind == "Node" && tm.APIVersion == "v1":
		var node corev1.Node
		if err := json.Unmarshal(trimmed, &node); err != nil {
			s.fail(loc, fmt.Errorf("Node: %v", err))
			return
		}
		s.Nodes = append(s.Nodes, &node)
	case strings.HasSuffix(tm.Kind, "List"):
		s.decodeList(loc, trimmed, depth)
	default:
		if s.Skipped == nil {
			s.Skipped = map[string]int{}
		}
		s.Skipped[tm.APIVersion+"/"+tm.Kind]++
	}
}

func (s *Set) decodeList(loc Location, data []byte, depth int) {
	if depth >= maxListDepth {
		s.fail(loc, fmt.Errorf("Lists nested more than %d deep", maxListDepth))
		return
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		s.fail(loc, fmt.Errorf("List items: %v", err))
		return
	}
	for i, item := range list.Items {
		itemLoc := loc
		itemLoc.Item = i + 1
		s.decodeObject(itemLoc, item, depth+1)
	}
}

// strictUnmarshal decodes like the API server with field validation Strict
// (kubectl's default): an unknown or duplicated field is an error, because a
// misspelt "tolerations" would otherwise pass silently here and be refused
// (or dropped) by the cluster.
func strictUnmarshal(data []byte, v any) error {
	strictErrs, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		return err
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = e.Error()
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}
