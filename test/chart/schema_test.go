package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// schema is values.schema.json, loosely typed.
type schema map[string]any

func loadSchema(t *testing.T) schema {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "charts", "dsguard", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s schema
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return s
}

// resolve follows a local $ref.
func (s schema) resolve(node map[string]any) map[string]any {
	for {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node
		}
		name := strings.TrimPrefix(ref, "#/definitions/")
		node, _ = s["definitions"].(map[string]any)[name].(map[string]any)
		if node == nil {
			return map[string]any{}
		}
	}
}

// property returns the schema of a key below an object schema.
func (s schema) property(node map[string]any, key string) map[string]any {
	props, _ := s.resolve(node)["properties"].(map[string]any)
	p, _ := props[key].(map[string]any)
	if p == nil {
		return nil
	}
	return s.resolve(p)
}

// TestSchema_ClosedAtEveryLevel: every object in values.schema.json either
// lists its keys and forbids others, or is a map whose values have a type
// (labels, annotations, resource quantities); `global` alone is open, for
// use as a subchart.
func TestSchema_ClosedAtEveryLevel(t *testing.T) {
	s := loadSchema(t)
	var walk func(path string, node any)
	walk = func(path string, node any) {
		switch n := node.(type) {
		case map[string]any:
			if n["type"] == "object" && path != "/properties/global" {
				switch ap := n["additionalProperties"].(type) {
				case bool:
					if ap {
						t.Errorf("%s: additionalProperties true", path)
					}
					if _, ok := n["properties"]; !ok {
						t.Errorf("%s: additionalProperties false without properties", path)
					}
				case map[string]any:
					if len(ap) == 0 {
						t.Errorf("%s: additionalProperties {} allows anything", path)
					}
				default:
					t.Errorf("%s: object without additionalProperties", path)
				}
			}
			for k, v := range n {
				walk(path+"/"+k, v)
			}
		case []any:
			for i, v := range n {
				walk(path+"/"+strconv.Itoa(i), v)
			}
		}
	}
	walk("", map[string]any(s))
	if g := s.property(map[string]any(s), "global"); g == nil || g["type"] != "object" {
		t.Errorf("the schema must allow global (subchart use), got %v", g)
	}
}

// TestSchema_CoversEveryValue: every key of values.yaml is in the schema (else
// the chart's own defaults would fail validation), and every top-level key of
// the schema is in values.yaml (so it is documented in the README).
func TestSchema_CoversEveryValue(t *testing.T) {
	s := loadSchema(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "charts", "dsguard", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v map[string]any, node map[string]any)
	walk = func(path string, v map[string]any, node map[string]any) {
		for k, val := range v {
			p := s.property(node, k)
			if p == nil {
				t.Errorf("values.yaml has %s%s, the schema does not", path, k)
				continue
			}
			if m, ok := val.(map[string]any); ok && p["properties"] != nil {
				walk(path+k+".", m, p)
			}
		}
	}
	root := map[string]any(s)
	walk("", values, root)
	for k := range root["properties"].(map[string]any) {
		if _, ok := values[k]; !ok && k != "global" {
			t.Errorf("the schema has %s, values.yaml does not (so the README does not document it)", k)
		}
	}
}

// TestSchema_PolicyMirrorsConfig keeps the schema of the policy value in step
// with dsguard's policy types: the same keys at every level, each object closed.
func TestSchema_PolicyMirrorsConfig(t *testing.T) {
	s := loadSchema(t)
	var walk func(path string, typ reflect.Type, node map[string]any)
	walk = func(path string, typ reflect.Type, node map[string]any) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ == reflect.TypeFor[policy.RulesConfig]() {
			// The rules' part is typed by the registry: one field per rule,
			// keyed by rule ID, with that rule's parameters.
			v, err := rules.Builtin().DefaultConfig().Rules.MarshalYAML()
			if err != nil {
				t.Fatal(err)
			}
			typ = reflect.TypeOf(v)
		}
		switch typ.Kind() {
		case reflect.Struct:
			node = s.resolve(node)
			if node["additionalProperties"] != false {
				t.Errorf("policy schema %s: not closed (additionalProperties false)", path)
			}
			var want []string
			for _, f := range yamlFields(typ) {
				tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				want = append(want, tag)
				child := s.property(node, tag)
				if child == nil {
					t.Errorf("policy schema %s lacks %s", path, tag)
					continue
				}
				walk(path+"."+tag, f.Type, child)
			}
			var got []string
			props, _ := node["properties"].(map[string]any)
			for k := range props {
				got = append(got, k)
			}
			sort.Strings(want)
			sort.Strings(got)
			if !slices.Equal(want, got) {
				t.Errorf("policy schema %s has keys %v, the Go type %s has %v", path, got, typ, want)
			}
		case reflect.Slice:
			if node["type"] != "array" {
				t.Errorf("policy schema %s: type %v, want array", path, node["type"])
				return
			}
			items, _ := node["items"].(map[string]any)
			walk(path+"[]", typ.Elem(), items)
		case reflect.Map:
			if s.resolve(node)["type"] != "object" {
				t.Errorf("policy schema %s: want an object (map)", path)
			}
		case reflect.String:
			n := s.resolve(node)
			if n["type"] != "string" && n["enum"] == nil && n["const"] == nil {
				t.Errorf("policy schema %s: want a string, got %v", path, n)
			}
		case reflect.Bool:
			if s.resolve(node)["type"] != "boolean" {
				t.Errorf("policy schema %s: want a boolean", path)
			}
		case reflect.Int:
			if s.resolve(node)["type"] != "integer" {
				t.Errorf("policy schema %s: want an integer", path)
			}
		default:
			t.Errorf("policy schema %s: Go kind %s not handled by this test", path, typ.Kind())
		}
	}
	walk("policy", reflect.TypeFor[policy.Config](), s.property(map[string]any(s), "policy"))
}

// TestSchema_RejectsUnknownKeys: a misspelt value fails `helm lint` and
// `helm template` with both Helm versions, at the top level, nested, and in
// the policy; global is accepted.
func TestSchema_RejectsUnknownKeys(t *testing.T) {
	e := setup(t)
	for _, h := range e.helms() {
		for _, set := range []string{"replicaCont=3", "webhook.failurPolicy=Ignore", "policy.rules.privileged.acton=deny",
			"policy.rules.no-such-rule.action=deny", "securityContext.runAsNonRot=true", "webhook.failurePolicy=Sometimes",
			"prometheusRule.runbookURL=https://example.com"} {
			t.Run(h.name+"/"+set, func(t *testing.T) {
				r := e.run(h.path, "template", "dsguard", "charts/dsguard", "--set", set)
				if r.err == nil || !strings.Contains(r.stderr, "schema") {
					t.Errorf("want a schema error:\n%s", r)
				}
			})
		}
		t.Run(h.name+"/global", func(t *testing.T) {
			if r := e.run(h.path, "lint", "--strict", "charts/dsguard", "--set", "global.imageRegistry=example.com"); r.err != nil {
				t.Errorf("global must be accepted: %v\n%s", r.err, r)
			}
		})
	}
}

// TestSchema_AcceptsTheExamplePolicy: examples/policy.yaml, every key with its
// default, is a valid `policy` value for both Helm versions, and renders into
// a ConfigMap dsguard accepts.
func TestSchema_AcceptsTheExamplePolicy(t *testing.T) {
	e := setup(t)
	example, err := os.ReadFile(filepath.Join(e.root, "examples", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(example, &doc); err != nil {
		t.Fatal(err)
	}
	values, err := yaml.Marshal(map[string]any{"policy": doc})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, values, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, h := range e.helms() {
		if r := e.run(h.path, "lint", "--strict", "charts/dsguard", "--values", file); r.err != nil {
			t.Fatalf("%s: %v\n%s", h.name, r.err, r)
		}
		objs := objects(t, e.template(t, h, "--values", file, "--show-only", "templates/policy-configmap.yaml"))
		rendered, _ := get(objs[0], "data", "policy.yaml").(string)
		cfg, err := rules.Builtin().ParseConfig([]byte(rendered))
		if err != nil {
			t.Fatalf("%s: dsguard refuses the rendered example policy: %v", h.name, err)
		}
		want, err := rules.Builtin().ParseConfig(example)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cfg, want) {
			t.Errorf("%s: the policy differs after a round trip through the chart", h.name)
		}
	}
}

// yamlFields returns the fields yaml reads of a struct, with the fields of
// inlined structs in place of them.
func yamlFields(typ reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case strings.Contains(opts, "inline"):
			out = append(out, yamlFields(f.Type)...)
		case tag != "" && tag != "-":
			out = append(out, f)
		}
	}
	return out
}
