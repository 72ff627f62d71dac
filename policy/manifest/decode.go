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
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Location names where an object came from.
type Location struct {
	// File is the path as given, or "-" for standard input. For rendered
	// input it is the template (Helm) or the kustomization directory.
	File string `json:"file"`
	// Document is the 1-based position of the YAML document in the file
	// (in the rendered output, for rendered input).
	Document int `json:"document"`
	// Item is the 1-based position inside a List object, 0 when not in a List.
	Item int `json:"item,omitempty"`
	// Line is the line the document starts on in File; 0 for rendered
	// input, whose lines are not the template's.
	Line int `json:"line,omitempty"`
	// RenderedBy names how the input was produced ("helm", "kustomize"),
	// empty for a file read as written.
	RenderedBy string `json:"renderedBy,omitempty"`
}

func (l Location) String() string {
	s := fmt.Sprintf("%s: document %d", l.File, l.Document)
	if l.Item > 0 {
		s += fmt.Sprintf(", item %d", l.Item)
	}
	if l.RenderedBy != "" {
		s += " (rendered by " + l.RenderedBy + ")"
	}
	return s
}

// DaemonSet is a decoded DaemonSet and where it came from.
type DaemonSet struct {
	Location  Location
	DaemonSet *appsv1.DaemonSet
	// src is the text it was decoded from, kept to find the line of a
	// field; its doc is nil for rendered input.
	src source
}

// source is the text an object was decoded from: a whole document (item,
// when not zero, selects the object among the document's List items), or a
// List item streamed on its own, de-indented by column. A JSON value read
// from the middle of a line starts pad columns in: only its first line is
// shifted.
type source struct {
	doc               []byte
	item, column, pad int
}

// kept returns a copy of src that outlives the buffer it points into, with
// a JSON value's first line padded to its columns in the file.
func (src source) kept() source {
	doc := make([]byte, src.pad, src.pad+len(src.doc))
	for i := range doc {
		doc[i] = ' '
	}
	src.doc, src.pad = append(doc, src.doc...), 0
	return src
}

// Position returns where the field named by path (a field.Path string) is
// written in the file: the field itself, or its nearest ancestor present in
// the document. It is zero for rendered input and for a DaemonSet that was
// not read from a file.
func (d *DaemonSet) Position(path string) Position {
	if d.src.doc == nil || d.Location.Line == 0 {
		return Position{}
	}
	p := locate(d.src.doc, d.Location.Line, d.src.item, path)
	if p.Column > 0 {
		p.Column += d.src.column
	}
	return p
}

// Error is a document that could not be used.
type Error struct {
	Location Location
	Err      error
}

func (e *Error) Error() string { return e.Location.String() + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// removedDaemonSetVersions were served once and are gone since Kubernetes 1.16.
var removedDaemonSetVersions = map[string]bool{
	"extensions/v1beta1": true,
	"apps/v1beta1":       true,
	"apps/v1beta2":       true,
}

// maxListDepth bounds List nesting, so a crafted document cannot recurse deeply.
const maxListDepth = 4

// Decode reads every document from r, attributing them to file, and hands
// each DaemonSet and Node to the Reader's callbacks as soon as it is decoded:
// only one document is held at a time.
func (rd *Reader) Decode(file string, r io.Reader) {
	rd.decode(Location{File: file}, r)
}

func (rd *Reader) decode(base Location, r io.Reader) {
	rd.Files++
	br := bufio.NewReaderSize(r, 64<<10)
	if looksLikeJSON(br) {
		rd.decodeJSON(base, br)
		return
	}
	docs := newDocuments(br)
	for {
		p, err := docs.next()
		if errors.Is(err, io.EOF) {
			return
		}
		loc := base
		loc.Document = p.doc
		loc.Item = p.item
		if base.RenderedBy == "" {
			loc.Line = p.line
		}
		if err != nil {
			rd.fail(loc, fmt.Errorf("cannot read: %w", err))
			return
		}
		jsonData, err := toJSON(p.data)
		if err != nil {
			rd.fail(loc, err)
			continue
		}
		if p.item > 0 {
			// A List's item, streamed: at depth 1, as decodeList would
			// hand it on; where its text starts in the file is kept
			// to point at its fields.
			rd.decodeObject(loc, source{doc: p.data, column: p.column}, jsonData, 1)
			continue
		}
		if p.streamed > 0 {
			// Its items came out already: what remains says whether
			// it was a List, something else of Kubernetes (an error:
			// its items were read as objects), or no Kubernetes at
			// all (items that were not objects were skipped too).
			var tm metav1.TypeMeta
			_ = json.Unmarshal(jsonData, &tm)
			switch {
			case strings.HasSuffix(tm.Kind, "List"):
			case tm.APIVersion == "" && tm.Kind == "":
				rd.notKubernetes(loc)
				continue
			default:
				rd.fail(loc, fmt.Errorf("%s has top-level items, read as a List's; only a List has them", tm.Kind))
				continue
			}
		}
		rd.decodeObject(loc, source{doc: p.data}, jsonData, 0)
	}
}

// toJSON converts a document or item to JSON; one that is JSON already (a
// kubectl get -o json dump) skips the YAML parser, which is many times
// slower.
func toJSON(data []byte) ([]byte, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t, nil
	}
	out, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: yaml: "))
	}
	return out, nil
}

func (rd *Reader) fail(loc Location, err error) {
	rd.Errors = append(rd.Errors, &Error{Location: loc, Err: err})
}

// notKubernetes records a document that is YAML but no Kubernetes object
// (Helm values, CI configuration): it is skipped, with one note per file.
func (rd *Reader) notKubernetes(loc Location) {
	if n := len(rd.Ignored); n > 0 && rd.Ignored[n-1] == loc.File {
		return
	}
	rd.Ignored = append(rd.Ignored, loc.File)
}

func (rd *Reader) decodeObject(loc Location, src source, data []byte, depth int) {
	rd.decodeObjectAs(loc, src, data, depth, nil)
}

// decodeObjectAs decodes an object; implied, when set, is the type of an
// object that names none (an item of an API server's NodeList).
func (rd *Reader) decodeObjectAs(loc Location, src source, data []byte, depth int, implied *metav1.TypeMeta) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return // an empty document, e.g. only comments
	}
	if trimmed[0] != '{' {
		rd.notKubernetes(loc)
		return
	}
	if implied != nil && rd.decodeImplied(loc, trimmed, *implied) {
		return
	}
	tm, err := typeMeta(trimmed)
	if err != nil {
		rd.fail(loc, err)
		return
	}
	if tm.APIVersion == "" && tm.Kind == "" && implied != nil {
		tm = *implied
	}
	switch {
	case tm.APIVersion == "" && tm.Kind == "":
		rd.notKubernetes(loc)
		return
	case tm.APIVersion == "" || tm.Kind == "":
		rd.fail(loc, errors.New("not a Kubernetes object: apiVersion and kind are both required"))
		return
	}
	if strings.HasSuffix(tm.Kind, "List") {
		rd.decodeList(loc, src.doc, trimmed, depth, itemType(tm))
		return
	}
	rd.Objects++
	switch {
	case tm.Kind == "DaemonSet" && tm.APIVersion == "apps/v1":
		var ds appsv1.DaemonSet
		if err := strictUnmarshal(trimmed, &ds); err != nil {
			rd.fail(loc, fmt.Errorf("DaemonSet: %w", err))
			return
		}
		if err := validateDaemonSet(&ds); err != nil {
			rd.fail(loc, fmt.Errorf("DaemonSet %s: the API server would refuse it: %w", displayName(&ds), err))
			return
		}
		d := DaemonSet{Location: loc, DaemonSet: &ds}
		if loc.Line > 0 {
			// The DaemonSet keeps the text only: the document's
			// buffer is reused for the next one.
			d.src = src.kept()
		}
		if rd.OnDaemonSet != nil {
			rd.OnDaemonSet(d)
		}
	case tm.Kind == "DaemonSet" && removedDaemonSetVersions[tm.APIVersion]:
		rd.fail(loc, fmt.Errorf("DaemonSet apiVersion %s was removed in Kubernetes 1.16; "+
			"change it to apps/v1 (which also requires spec.selector to match the template labels)", tm.APIVersion))
	case tm.Kind == "Node" && tm.APIVersion == "v1":
		if rd.OnNode != nil {
			handOn(rd, loc, trimmed, nodeType, false, decodeNode, rd.OnNode)
		}
	case tm.Kind == "Pod" && tm.APIVersion == "v1" && rd.OnPod != nil:
		handOn(rd, loc, trimmed, podType, false, decodePod, rd.OnPod)
	case tm.Kind == "PriorityClass" && tm.APIVersion == "scheduling.k8s.io/v1" && rd.OnPriorityClass != nil:
		var pc schedulingv1.PriorityClass
		if decodeInto(rd, loc, trimmed, "PriorityClass", &pc) {
			rd.OnPriorityClass(&pc)
		}
	case tm.Kind == "Namespace" && tm.APIVersion == "v1" && rd.OnNamespace != nil:
		var ns corev1.Namespace
		if decodeInto(rd, loc, trimmed, "Namespace", &ns) {
			rd.OnNamespace(&ns)
		}
	case rd.OnTaintDeclaration != nil && rd.DeclaresTaints != nil && rd.DeclaresTaints(tm.GroupVersionKind().Group, tm.Kind):
		var obj unstructured.Unstructured
		if decodeInto(rd, loc, trimmed, tm.Kind, &obj.Object) {
			rd.OnTaintDeclaration(&obj)
		}
	default:
		if rd.Skipped == nil {
			rd.Skipped = map[string]int{}
		}
		rd.Skipped[tm.APIVersion+"/"+tm.Kind]++
	}
}

// decodeImplied decodes an item of a NodeList or PodList as the List's kind
// in one pass, without reading its apiVersion and kind first; it reports
// false, having handed nothing on, when the item names a type of its own
// that is not the List's (the caller then reads it as any object).
func (rd *Reader) decodeImplied(loc Location, obj []byte, implied metav1.TypeMeta) bool {
	switch {
	case implied == nodeType && rd.OnNode != nil:
		return handOn(rd, loc, obj, implied, true, decodeNode, rd.OnNode)
	case implied == podType && rd.OnPod != nil:
		return handOn(rd, loc, obj, implied, true, decodePod, rd.OnPod)
	}
	return false
}

var (
	nodeType = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	podType  = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
)

// handOn decodes obj, an object of type want, and hands it to on, or
// records why it could not be decoded. An item of a typed List (listItem)
// is not yet counted and may name no type: it reports false, having done
// nothing, when the item names a type other than want.
func handOn[T any](rd *Reader, loc Location, obj []byte, want metav1.TypeMeta, listItem bool,
	decode func([]byte) (T, metav1.TypeMeta, error), on func(T)) bool {
	v, tm, err := decode(obj)
	if listItem {
		if err == nil && tm != (metav1.TypeMeta{}) && tm != want {
			return false
		}
		rd.Objects++
	}
	if err != nil {
		rd.fail(loc, fmt.Errorf("%s: %v", want.Kind, err))
		return true
	}
	on(v)
	return true
}

// decodeInto decodes an object read back from the API server (no strict
// field checks: a newer server's fields are not an error) and records a
// failure under kind.
func decodeInto(rd *Reader, loc Location, data []byte, kind string, into any) bool {
	if err := json.Unmarshal(data, into); err != nil {
		rd.fail(loc, fmt.Errorf("%s: %v", kind, err))
		return false
	}
	return true
}

func (rd *Reader) decodeList(loc Location, doc, data []byte, depth int, implied *metav1.TypeMeta) {
	if depth >= maxListDepth {
		rd.fail(loc, fmt.Errorf("Lists nested more than %d deep", maxListDepth))
		return
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		rd.fail(loc, fmt.Errorf("List items: %v", err))
		return
	}
	for i, item := range list.Items {
		itemLoc := loc
		if depth == 0 {
			itemLoc.Item = i + 1
		} else {
			itemLoc.Line = 0 // nested Lists: no position worth the bookkeeping
		}
		rd.decodeObjectAs(itemLoc, source{doc: doc, item: itemLoc.Item}, item, depth+1, implied)
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
