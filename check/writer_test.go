package check

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

type streamItem struct {
	Name string            `json:"name"`
	Tags []string          `json:"tags,omitempty"`
	Meta map[string]string `json:"meta,omitempty"`
}

type streamRun struct {
	Tool  string   `json:"tool"`
	Items any      `json:"items"`
	After []string `json:"after"`
}

type streamDoc struct {
	Kind string         `json:"kind"`
	Runs []streamRun    `json:"runs"`
	Tail map[string]int `json:"tail"`
}

// TestJSONStream_SameBytesAsEncoder: a document written element by element
// is byte for byte what json.Encoder writes for the whole document, at any
// depth and with any number of elements.
func TestJSONStream_SameBytesAsEncoder(t *testing.T) {
	items := []streamItem{
		{Name: "a"},
		{Name: "<b> & \"c\"", Tags: []string{"x", "y"}, Meta: map[string]string{"z": "1", "a": "2"}},
		{Name: "\u2028 line separator", Tags: []string{}},
	}
	for _, n := range []int{0, 1, len(items)} {
		for _, nested := range []bool{false, true} {
			doc := func(elems any) any {
				if !nested {
					return &streamRun{Tool: "t", Items: elems, After: []string{"end"}}
				}
				return &streamDoc{Kind: "k", Runs: []streamRun{{Tool: "t", Items: elems, After: []string{}}}, Tail: map[string]int{"n": n}}
			}
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetIndent("", "  ")
			if err := enc.Encode(doc(append([]streamItem{}, items[:n]...))); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			s := jsonStream{w: &got}
			for _, it := range items[:n] {
				if err := s.element(doc(streamMarker), it); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.finish(doc(streamMarker)); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("%d elements, nested %v: streamed\n%s\nencoder\n%s", n, nested, got.String(), want.String())
			}
		}
	}
	if err := (&jsonStream{w: &bytes.Buffer{}}).finish(&streamRun{}); err == nil {
		t.Error("a skeleton without the marker was accepted")
	}
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errors.New("disk full")
	}
	f.n -= len(p)
	return len(p), nil
}

// TestRun_StreamErrorStopsTheRun: once the output cannot be written, the run
// stops judging and returns that error, not a result.
func TestRun_StreamErrorStopsTheRun(t *testing.T) {
	calls := 0
	r, err := Run(Input{Paths: []string{"../examples"}, Env: policy.Env{Policy: rules.Builtin().Default(), Now: time.Now()},
		Namespace: "default", Stream: func(res *Result) error {
			calls++
			return NewJSONWriter(&failingWriter{}).Result(res)
		}})
	if err == nil || !strings.Contains(err.Error(), "disk full") || r != nil || calls != 1 {
		t.Errorf("Run = %v, %v after %d results; want the write error after the first", r, err, calls)
	}
}

// TestRun_StoppedMidStream: a path that cannot be read after DaemonSets were
// written ends every format's output well-formed, saying why it stopped, and
// the run fails.
func TestRun_StoppedMidStream(t *testing.T) {
	tool := Tool{Version: "v1", Rules: rules.Builtin().Rules()}
	for _, tt := range []struct {
		format string
		writer func(*bytes.Buffer) Writer
		check  func(t *testing.T, out []byte)
	}{
		{"json", func(b *bytes.Buffer) Writer { return NewJSONWriter(b) }, func(t *testing.T, out []byte) {
			var rep struct {
				Results []jsonResult
				Summary Summary
				Error   string
			}
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			if len(rep.Results) != 1 || rep.Summary.DaemonSets != 1 || !strings.Contains(rep.Error, "results are incomplete") {
				t.Errorf("report = %+v", rep)
			}
		}},
		{"sarif", func(b *bytes.Buffer) Writer { return NewSARIFWriter(b, tool) }, func(t *testing.T, out []byte) {
			var log struct {
				Runs []struct {
					Invocations []struct {
						ExecutionSuccessful        bool
						ToolExecutionNotifications []struct{ Level string }
					}
				}
			}
			if err := json.Unmarshal(out, &log); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			inv := log.Runs[0].Invocations[0]
			if inv.ExecutionSuccessful || len(inv.ToolExecutionNotifications) == 0 || inv.ToolExecutionNotifications[0].Level != "error" {
				t.Errorf("invocation = %+v", inv)
			}
		}},
		{"junit", func(b *bytes.Buffer) Writer { return NewJUnitWriter(b, policy.ActionDeny) }, func(t *testing.T, out []byte) {
			var suites junitSuites
			if err := xml.Unmarshal(out, &suites); err != nil {
				t.Fatalf("not XML: %v", err)
			}
			cases := suites.Suites[0].Cases
			if suites.Tests != 2 || suites.Errors != 1 || len(cases) != 2 || cases[1].Error == nil || cases[1].Error.Type != "stopped" {
				t.Errorf("suites = %+v", suites)
			}
		}},
	} {
		t.Run(tt.format, func(t *testing.T) {
			var out bytes.Buffer
			w := tt.writer(&out)
			r, err := Run(Input{Paths: []string{"../examples/node-exporter.yaml", "testdata/no-such-file.yaml"},
				Env: policy.Env{Policy: rules.Builtin().Default(), Now: time.Now()}, Namespace: "default", Stream: w.Result})
			if !errors.Is(err, os.ErrNotExist) || r == nil || r.Stopped == nil || r.ExitCode() != ExitInvalid {
				t.Fatalf("Run = %+v, %v; want the results so far, stopped, and the error", r, err)
			}
			if err := w.Finish(r); err != nil {
				t.Fatal(err)
			}
			tt.check(t, out.Bytes())
		})
	}
}

// TestJUnitWriter_LeavesNoFile: the test cases held until the counts are
// known leave no file behind, finished or not.
func TestJUnitWriter_LeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	r := runCodescan(t, policy.ActionDeny)
	var out bytes.Buffer
	if err := WriteJUnit(&out, r); err != nil {
		t.Fatal(err)
	}
	unfinished := NewJUnitWriter(&out, policy.ActionDeny)
	if err := unfinished.Result(&r.Results[0]); err != nil {
		t.Fatal(err)
	}
	if err := unfinished.Close(); err != nil {
		t.Fatal(err)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Errorf("left in TMPDIR: %v %v", left, err)
	}
}

// TestWriters_StreamedAsWhole: every format writes the same report whether
// the results are streamed during the run or kept and written after it.
func TestWriters_StreamedAsWhole(t *testing.T) {
	tool := Tool{Version: "v1", Rules: rules.Builtin().Rules()}
	for name, newWriter := range map[string]func(*bytes.Buffer) Writer{
		"text":   func(b *bytes.Buffer) Writer { return NewTextWriter(b, false) },
		"wide":   func(b *bytes.Buffer) Writer { return NewTextWriter(b, true) },
		"github": func(b *bytes.Buffer) Writer { return NewGitHubWriter(b) },
		"json":   func(b *bytes.Buffer) Writer { return NewJSONWriter(b) },
		"sarif":  func(b *bytes.Buffer) Writer { return NewSARIFWriter(b, tool) },
		"junit":  func(b *bytes.Buffer) Writer { return NewJUnitWriter(b, policy.ActionWarn) },
	} {
		in := Input{Paths: []string{"../examples", "../cmd/dsguard/testdata/mixed"}, Namespace: "default", FailOn: policy.ActionWarn,
			Env: policy.Env{Policy: rules.Builtin().Default(), Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
		kept, err := Run(in)
		if err != nil {
			t.Fatal(err)
		}
		var whole, streamed bytes.Buffer
		if err := writeAll(newWriter(&whole), kept); err != nil {
			t.Fatal(err)
		}
		w := newWriter(&streamed)
		in.Stream = w.Result
		r, err := Run(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Finish(r); err != nil {
			t.Fatal(err)
		}
		if len(kept.Results) < 2 || whole.String() != streamed.String() {
			t.Errorf("%s: written after the run (%d results)\n%s\nstreamed\n%s", name, len(kept.Results), whole.String(), streamed.String())
		}
	}
}
