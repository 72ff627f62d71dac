package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// ListWriter writes a v1 List item by item, as kubectl get -o yaml or -o
// json prints one, so that a List of millions of objects is never held;
// the Reader streams it back the same way.
type ListWriter struct {
	w     *bufio.Writer
	json  bool
	items int
	err   error
}

// NewListWriter starts a List in format "yaml" or "json".
func NewListWriter(w io.Writer, format string) (*ListWriter, error) {
	if format != "yaml" && format != "json" {
		return nil, fmt.Errorf("unknown output format %q (want yaml or json)", format)
	}
	lw := &ListWriter{w: bufio.NewWriterSize(w, 256<<10), json: format == "json"}
	if lw.json {
		_, lw.err = lw.w.WriteString("{\n    \"apiVersion\": \"v1\",\n    \"items\": [")
	} else {
		_, lw.err = lw.w.WriteString("apiVersion: v1\n")
	}
	return lw, lw.err
}

// Write adds one object (with its apiVersion and kind set).
func (lw *ListWriter) Write(obj any) error {
	if lw.err != nil {
		return lw.err
	}
	if lw.json {
		b, err := json.MarshalIndent(obj, "        ", "    ")
		if err != nil {
			return err
		}
		sep := ",\n        "
		if lw.items == 0 {
			sep = "\n        "
		}
		lw.w.WriteString(sep)
		_, lw.err = lw.w.Write(b)
		lw.items++
		return lw.err
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	if lw.items == 0 {
		lw.w.WriteString("items:\n")
	}
	// "- " before the first line, two spaces before the others.
	for i, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if i == 0 {
			lw.w.WriteString("- ")
		} else {
			lw.w.WriteString("  ")
		}
		_, lw.err = lw.w.Write(line)
	}
	lw.items++
	return lw.err
}

// Close ends the List and flushes it.
func (lw *ListWriter) Close() error {
	if lw.err != nil {
		return lw.err
	}
	switch {
	case lw.json && lw.items == 0:
		lw.w.WriteString("],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n")
	case lw.json:
		lw.w.WriteString("\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n")
	case lw.items == 0:
		lw.w.WriteString("items: []\nkind: List\nmetadata:\n  resourceVersion: \"\"\n")
	default:
		lw.w.WriteString("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
	}
	return lw.w.Flush()
}
