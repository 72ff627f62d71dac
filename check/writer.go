package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Writer writes a report in one output format while the check runs: Result
// for each DaemonSet as soon as it is judged (an Input.Stream), then Finish
// once with what is only known at the end (counts, unreadable documents,
// notes). No format keeps a Result after writing it, so memory follows the
// largest document, not the input.
type Writer interface {
	// Result writes one DaemonSet's result.
	Result(*Result) error
	// Finish writes the rest of the report and ends it. r.Results is not
	// read: those results are expected to have been handed to Result. When
	// r.Stopped is set, the report is ended well-formed where the format
	// allows and says the run was cut short.
	Finish(r *Results) error
}

// writeAll writes a report whose results were kept in memory.
func writeAll(w Writer, r *Results) error {
	for i := range r.Results {
		if err := w.Result(&r.Results[i]); err != nil {
			return err
		}
	}
	return w.Finish(r)
}

// streamMarker stands in a JSON report's skeleton for the array that is
// written element by element. The NUL bytes keep it from being mistaken
// for any text of the report.
const streamMarker = "\x00dsguard streamed array\x00"

// jsonStream writes a JSON document with one array written element by
// element, byte for byte as json.Encoder with SetIndent("", "  ") writes the
// whole document: the text before the array, each element as it comes, then
// the text after it, which may hold what is only known at the end.
type jsonStream struct {
	w io.Writer
	// started is set once the text before the array is written.
	started bool
	// n counts the elements written.
	n int
	// indent is the indentation of the array's line.
	indent string
}

// splitSkeleton marshals a document whose streamed array is streamMarker and
// returns the text before and after it, and the indentation of its line.
func splitSkeleton(skeleton any) (before, after, indent string, err error) {
	b, err := json.MarshalIndent(skeleton, "", "  ")
	if err != nil {
		return "", "", "", err
	}
	marker, err := json.Marshal(streamMarker)
	if err != nil {
		return "", "", "", err
	}
	i := bytes.Index(b, marker)
	if i < 0 {
		return "", "", "", fmt.Errorf("report skeleton without its streamed array")
	}
	before, after = string(b[:i]), string(b[i+len(marker):])
	line := before[strings.LastIndexByte(before, '\n')+1:]
	return before, after, line[:len(line)-len(strings.TrimLeft(line, " "))], nil
}

// start writes the text before the array, once.
func (s *jsonStream) start(skeleton any) error {
	if s.started {
		return nil
	}
	before, _, indent, err := splitSkeleton(skeleton)
	if err != nil {
		return err
	}
	s.started, s.indent = true, indent
	_, err = io.WriteString(s.w, before)
	return err
}

// element writes the next element of the array; skeleton is the document,
// for the text before the array when this is the first element.
func (s *jsonStream) element(skeleton, v any) error {
	if err := s.start(skeleton); err != nil {
		return err
	}
	inner := s.indent + "  "
	b, err := json.MarshalIndent(v, inner, "  ")
	if err != nil {
		return err
	}
	sep := ",\n"
	if s.n == 0 {
		sep = "[\n"
	}
	s.n++
	_, err = io.WriteString(s.w, sep+inner+string(b))
	return err
}

// finish closes the array and writes the text after it, taken from skeleton,
// which now holds what is known at the end.
func (s *jsonStream) finish(skeleton any) error {
	if err := s.start(skeleton); err != nil {
		return err
	}
	_, after, _, err := splitSkeleton(skeleton)
	if err != nil {
		return err
	}
	closing := "[]"
	if s.n > 0 {
		closing = "\n" + s.indent + "]"
	}
	_, err = io.WriteString(s.w, closing+after+"\n")
	return err
}
