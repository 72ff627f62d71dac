// Command chart-readme writes the values table of a chart's README.md from the
// `# --` comments of its values.yaml (the helm-docs convention), so the README
// cannot drift from the values: a test fails when it does.
//
// Every value needs a `# --` comment directly above its key; the comment may go
// on over the following `#` lines and may start with a type in parentheses,
// `# -- (string) ...`, where the default does not show it. A mapping without a
// comment of its own is a group: its keys are documented one by one. A
// mapping with a comment is one value, shown with its whole default.
//
// The table replaces what lies between the lines <!-- values:begin --> and
// <!-- values:end --> of README.md; the rest of the README is prose kept by hand.
//
// Usage: go run ./hack/chart-readme [-chart charts/dsguard] [-check]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

const (
	beginMarker = "<!-- values:begin -->"
	endMarker   = "<!-- values:end -->"
)

func main() {
	chart := flag.String("chart", "charts/dsguard", "chart directory")
	check := flag.Bool("check", false, "fail if README.md is not up to date instead of writing it")
	flag.Parse()
	if err := run(*chart, *check); err != nil {
		fmt.Fprintln(os.Stderr, "chart-readme:", err)
		os.Exit(1)
	}
}

func run(chart string, check bool) error {
	readmePath := filepath.Join(chart, "README.md")
	current, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	want, err := Render(chart, current)
	if err != nil {
		return err
	}
	if bytes.Equal(current, want) {
		return nil
	}
	if check {
		return fmt.Errorf("%s is out of date with values.yaml: run `make chart-docs`", readmePath)
	}
	return os.WriteFile(readmePath, want, 0o644)
}

// Render returns readme with the values table between the markers rebuilt
// from the chart's values.yaml.
func Render(chart string, readme []byte) ([]byte, error) {
	values, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return nil, err
	}
	rows, err := Parse(values)
	if err != nil {
		return nil, err
	}
	begin := bytes.Index(readme, []byte(beginMarker+"\n"))
	end := bytes.Index(readme, []byte(endMarker))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("README.md needs the lines %s and %s around the values table", beginMarker, endMarker)
	}
	var out bytes.Buffer
	out.Write(readme[:begin+len(beginMarker)+1])
	out.WriteString(Table(rows))
	out.Write(readme[end:])
	return out.Bytes(), nil
}

// Row is one documented value.
type Row struct {
	Key         string
	Type        string
	Default     string
	Description string
}

// Parse reads the documented values of a values.yaml, in file order.
func Parse(values []byte) ([]Row, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("values.yaml must be one mapping")
	}
	var rows []Row
	var errs []error
	walk(doc.Content[0], "", &rows, &errs)
	return rows, errors.Join(errs...)
}

func walk(m *yaml.Node, prefix string, rows *[]Row, errs *[]error) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := prefix + k.Value
		typ, desc, ok := docComment(k.HeadComment)
		if !ok {
			if v.Kind == yaml.MappingNode && len(v.Content) > 0 {
				walk(v, key+".", rows, errs)
				continue
			}
			*errs = append(*errs, fmt.Errorf("values.yaml line %d: %s has no `# --` comment", k.Line, key))
			continue
		}
		var value any
		if err := v.Decode(&value); err != nil {
			*errs = append(*errs, fmt.Errorf("values.yaml line %d: %s: %w", k.Line, key, err))
			continue
		}
		if typ == "" {
			typ = typeOf(value)
		}
		*rows = append(*rows, Row{Key: key, Type: typ, Default: format(value), Description: desc})
	}
}

// docComment returns the type hint and text of the last `# --` comment block
// in a key's head comment; earlier comment lines are section prose.
func docComment(head string) (typ, desc string, ok bool) {
	lines := strings.Split(head, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "# --") {
			start = i
		}
	}
	if start < 0 {
		return "", "", false
	}
	var parts []string
	for i, l := range lines[start:] {
		l = strings.TrimSpace(l)
		if i == 0 {
			l = strings.TrimSpace(strings.TrimPrefix(l, "# --"))
		} else {
			l = strings.TrimSpace(strings.TrimPrefix(l, "#"))
		}
		if l != "" {
			parts = append(parts, l)
		}
	}
	desc = strings.Join(parts, " ")
	if strings.HasPrefix(desc, "(") {
		if end := strings.Index(desc, ")"); end > 0 {
			typ, desc = desc[1:end], strings.TrimSpace(desc[end+1:])
		}
	}
	return typ, desc, true
}

func typeOf(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case int, int64, uint64:
		return "int"
	case float64:
		return "float"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func format(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(b.String())
}

// Table renders the rows as a Markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n|---|---|---|---|\n")
	code := strings.NewReplacer("|", `\|`, "\n", " ")
	// Descriptions are Markdown: angle brackets (<fullname>) would be HTML.
	text := strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", r.Key, r.Type, code.Replace(r.Default), text.Replace(r.Description))
	}
	return b.String()
}
