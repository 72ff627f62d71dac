package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A JSON input is read token by token (jsontext), whatever its layout:
// kubectl's indented -o json, or the one line of an API server's List
// response (kubectl get --raw /api/v1/nodes), hundreds of megabytes
// without a newline. A top-level List's items come out one at a time and
// are forgotten once handed on, so memory follows the largest item, not
// the file; any other top-level value is handed on whole, as the YAML path
// hands on a document.

// looksLikeJSON reports whether a stream starts with a JSON object or
// array: "{" followed by a quoted name or "}", or "[". A YAML flow mapping
// ({apiVersion: v1, ...}) has an unquoted key and stays on the YAML path.
func looksLikeJSON(br *bufio.Reader) bool {
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if err != nil || len(b) < n {
			return false
		}
		b = bytes.TrimLeft(b, " \t\r\n\ufeff")
		if len(b) < 2 {
			if len(b) == 1 && b[0] == '[' {
				return true
			}
			if n > 4096 {
				return false
			}
			continue
		}
		switch {
		case b[0] == '[':
			return true
		case b[0] != '{':
			return false
		}
		rest := bytes.TrimLeft(b[1:], " \t\r\n")
		if len(rest) == 0 {
			if n > 4096 {
				return false
			}
			continue
		}
		return rest[0] == '"' || rest[0] == '}'
	}
}

// lineTracker passes a stream through to the JSON decoder and keeps the
// bytes read since the last forget, so that a value's text and the line and
// column it starts on are known once the decoder has returned it.
type lineTracker struct {
	r io.Reader
	// kept holds the stream's bytes from offset from on.
	kept []byte
	from int64
	// line is the 1-based line at offset from, which starts at lineStart.
	line      int
	lineStart int64
}

func (t *lineTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.kept = append(t.kept, p[:n]...)
	return n, err
}

// position returns the 1-based line and column of offset off (not before
// from).
func (t *lineTracker) position(off int64) (line, column int) {
	line, start := t.lineOf(t.kept[:off-t.from])
	return line, int(off-start) + 1
}

// lineOf returns the line that the byte after before (kept bytes from
// offset from on) is on, and the offset that line starts at. The last
// newline is looked for only when there is one: a List on one line
// (an API server's response) is never scanned backwards.
func (t *lineTracker) lineOf(before []byte) (line int, start int64) {
	n := bytes.Count(before, []byte{'\n'})
	if n == 0 {
		return t.line, t.lineStart
	}
	return t.line + n, t.from + int64(bytes.LastIndexByte(before, '\n')) + 1
}

// text returns the stream's bytes between two offsets, valid until the next
// Read or forget.
func (t *lineTracker) text(begin, end int64) []byte { return t.kept[begin-t.from : end-t.from] }

// forget drops the bytes before off.
func (t *lineTracker) forget(off int64) {
	t.line, t.lineStart = t.lineOf(t.kept[:off-t.from])
	n := copy(t.kept, t.kept[off-t.from:])
	t.kept = t.kept[:n]
	t.from = off
}

// jsonOptions read what kubectl and the API server write and what people
// edit by hand: a duplicated name or invalid UTF-8 is not a reason to stop
// reading (the objects' own decoding judges them as the YAML path does).
var jsonOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// decodeJSON reads a JSON stream of one or more top-level values.
func (rd *Reader) decodeJSON(base Location, r io.Reader) {
	t := &lineTracker{r: r, line: 1}
	dec := jsontext.NewDecoder(t, jsonOptions)
	for doc := 1; ; doc++ {
		loc := base
		loc.Document = doc
		kind := dec.PeekKind()
		if kind == 0 {
			_, err := dec.ReadToken()
			if !errors.Is(err, io.EOF) {
				rd.fail(loc, fmt.Errorf("not valid JSON: %v", jsonError(err)))
			}
			return
		}
		if kind != '{' {
			// An array or a scalar: no Kubernetes object.
			if _, err := dec.ReadValue(); err != nil {
				rd.fail(loc, fmt.Errorf("not valid JSON: %v", jsonError(err)))
				return
			}
			rd.notKubernetes(loc)
			t.forget(dec.InputOffset())
			continue
		}
		if err := rd.decodeJSONObject(loc, dec, t); err != nil {
			rd.fail(loc, fmt.Errorf("not valid JSON: %v", jsonError(err)))
			return
		}
	}
}

// decodeJSONObject reads one top-level object. Its "items", when an array,
// are streamed: each is handed on and forgotten. What the object turns out
// to be is known at its end (kubectl writes "kind" after "items"): a List
// is then done; an object that is not a List but had items is an error, as
// on the YAML path; any other object is handed on whole.
func (rd *Reader) decodeJSONObject(loc Location, dec *jsontext.Decoder, t *lineTracker) error {
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	begin := dec.InputOffset() - 1
	var tm metav1.TypeMeta
	streamed := 0
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if name.Kind() != '"' {
			return fmt.Errorf("object member name expected, found %s", name.Kind())
		}
		key := name.String()
		if key == "items" && dec.PeekKind() == '[' {
			if _, err := dec.ReadToken(); err != nil {
				return err
			}
			// The items of an API server's List carry no apiVersion
			// and kind: the List's (read before them, as the API
			// server writes it) names them.
			implied := itemType(tm)
			for dec.PeekKind() != ']' {
				item, err := dec.ReadValue()
				if err != nil {
					return err
				}
				end := dec.InputOffset()
				streamed++
				itemLoc := loc
				itemLoc.Item = streamed
				src := rd.jsonSource(&itemLoc, t, end-int64(len(item)), end)
				rd.decodeObjectAs(itemLoc, src, item, 1, implied)
				t.forget(end)
			}
			if _, err := dec.ReadToken(); err != nil {
				return err
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if v.Kind() == '"' && (key == "apiVersion" || key == "kind") {
			s, err := jsontext.AppendUnquote(nil, v)
			if err != nil {
				return err
			}
			if key == "apiVersion" {
				tm.APIVersion = string(s)
			} else {
				tm.Kind = string(s)
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	end := dec.InputOffset()
	defer t.forget(end)
	if streamed > 0 {
		switch {
		case strings.HasSuffix(tm.Kind, "List"):
		case tm.APIVersion == "" && tm.Kind == "":
			rd.notKubernetes(loc)
		default:
			rd.fail(loc, fmt.Errorf("%s has top-level items, read as a List's; only a List has them", tm.Kind))
		}
		return nil
	}
	src := rd.jsonSource(&loc, t, begin, end)
	rd.decodeObject(loc, src, t.text(begin, end), 0)
	return nil
}

// jsonSource sets loc's line to where the value between two offsets starts
// and returns its text for finding fields in; the text is the stream's
// buffer, which decodeObject copies for the one kind it keeps it for.
// Rendered input has no lines.
func (rd *Reader) jsonSource(loc *Location, t *lineTracker, begin, end int64) source {
	if loc.RenderedBy != "" {
		return source{}
	}
	line, column := t.position(begin)
	loc.Line = line
	return source{doc: t.text(begin, end), pad: column - 1}
}

// itemType is the type a List's kind names its items by (NodeList: v1
// Node); zero for a plain List, whose items name their own.
func itemType(list metav1.TypeMeta) *metav1.TypeMeta {
	kind, ok := strings.CutSuffix(list.Kind, "List")
	if !ok || kind == "" || list.APIVersion == "" {
		return nil
	}
	return &metav1.TypeMeta{APIVersion: list.APIVersion, Kind: kind}
}

// jsonError drops the decoder's package prefix: the message is the user's.
// The decoder picks "cannot" or "unable to" at random per process so that
// nobody matches its text; dsguard's messages say "cannot" every time.
func jsonError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "jsontext: ")
	if rest, ok := strings.CutPrefix(msg, "json: unable to "); ok {
		msg = "json: cannot " + rest
	}
	return msg
}
