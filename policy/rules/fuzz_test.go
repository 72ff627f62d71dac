package rules

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/dsguard/dsguard/policy"
)

// goTypeName matches the Go type names yaml.v3 puts in its messages
// ("policy.Config", "v1.TaintEffect").
var goTypeName = regexp.MustCompile(`\b(?:policy|v1)\.[A-Z][A-Za-z0-9]*`)

// FuzzParseConfig feeds ParseConfig arbitrary documents. Whatever the input,
// it must not panic; a failure must be a *ConfigError whose problems are
// one line each, point inside the document and name no Go types; a success
// must compile, evaluate, and parse the same way again.
func FuzzParseConfig(f *testing.F) {
	seeds := []string{
		"",
		"---\n",
		"# only a comment\n",
		"null\n",
		"{}\n",
		"[]\n",
		"just text\n",
		configHeader,
		configHeader + "enforcement: warn\nratcheting: false\n",
		configHeader + "namespaceEnforcement:\n- namespaces: [kube-system, \"team-*\"]\n  enforcement: audit\n",
		configHeader + "bypass:\n  users: [alice]\n  groups: [sre]\n",
		configHeader + "rules:\n  max-unavailable:\n    action: deny\n    parameters:\n      maxPercent: 10\n      maxCount: 3\n",
		configHeader + "rules:\n  control-plane-toleration:\n    parameters:\n      taints:\n      - {key: node-role.kubernetes.io/control-plane, effect: NoSchedule}\n      - {key: example.com/x, value: y, effect: NoExecute}\n",
		configHeader + "rules:\n  privileged:\n    allowExemptions: false\n    scope:\n      namespaces: {include: [\"team-*\"], exclude: [team-legacy]}\n      selector:\n        matchLabels: {app.kubernetes.io/name: node-exporter}\n        matchExpressions:\n        - {key: tier, operator: NotIn, values: [system]}\n",
		configHeader + "rules:\n  host-path-read-only:\n    parameters:\n      allowWritable: [/etc/cni/net.d]\n  image-pinned:\n    parameters:\n      requireDigest: true\n  update-strategy:\n    action: off\n",
		// Broken YAML.
		configHeader + "rules: [\n",
		configHeader + "rules:\n  privileged:\n  action: warn\n   bad indent\n",
		"apiVersion: \"unterminated\n",
		"\t- tab\n",
		"a: &a [*a, *a]\nb: *a\n",
		"%YAML 1.1\n---\n" + configHeader,
		"!!binary aGVsbG8=\n",
		configHeader + "---\n" + configHeader,
		configHeader + "enforcement: warn\nenforcement: audit\n",
		// Odd types.
		configHeader + "rules: 5\n",
		configHeader + "rules:\n  max-unavailable:\n    parameters:\n      maxPercent: abc\n",
		configHeader + "rules:\n  max-unavailable:\n    parameters:\n      maxPercent: 1e400\n",
		configHeader + "rules:\n  max-unavailable:\n    parameters:\n      maxCount: -9223372036854775809\n",
		configHeader + "ratcheting: maybe\n",
		configHeader + "ratcheting: ~\n",
		configHeader + "bypass: [a]\n",
		configHeader + "namespaceEnforcement: {a: b}\n",
		configHeader + "rules:\n  control-plane-toleration:\n    parameters:\n      taints: [{key: a, effect: [NoSchedule]}]\n",
		configHeader + "rules:\n  privileged:\n    scope:\n      selector:\n        matchLabels: {\"\": \"\"}\n        matchExpressions: [{key: \"\", operator: \"\"}]\n",
		configHeader + "rules:\n  privileged:\n    scope:\n      namespaces: {include: [\"[\", \"\\\\\"]}\n",
		configHeader + "rules:\n  ? [complex, key]\n  : x\n",
		configHeader + "rules:\n  privileged: !!map {action: warn}\n",
		configHeader + "rules:\n  privileged:\n    action: !!int 3\n",
		configHeader + "<<: {enforcement: warn}\n",
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "config", "*.yaml"))
	// The shipped example documents every key with its default.
	if _, err := os.Stat(filepath.Join("..", "examples", "policy.yaml")); err == nil {
		files = append(files, filepath.Join("..", "examples", "policy.yaml"))
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(data))
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	ds := nodeExporterDaemonSet()
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Builtin().ParseConfig(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("config and error %v returned together", err)
			}
			var ce *policy.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not a *ConfigError", err, err)
			}
			if len(ce.Problems) == 0 {
				t.Fatal("ConfigError without problems")
			}
			lines := yamlLines(data)
			for _, p := range ce.Problems {
				if p.Message == "" || strings.ContainsAny(p.Message, "\r\n") {
					t.Errorf("problem %+v: want a message of one line", p)
				}
				if p.Line < 0 || p.Line > lines {
					t.Errorf("problem %q: line %d outside the %d-line document", p, p.Line, lines)
				}
				if m := goTypeName.FindString(p.Message); m != "" && !bytes.Contains(data, []byte(m)) {
					t.Errorf("problem %q names the Go type %s", p, m)
				}
			}
			return
		}
		p, err := policy.Compile(cfg)
		if err != nil {
			t.Fatalf("ParseConfig accepted a config that does not compile: %v", err)
		}
		// The compiled policy must evaluate without panicking.
		policy.Evaluate(ds, policy.Env{Policy: p, Now: evalNow})
		again, err := Builtin().ParseConfig(data)
		if err != nil || !reflect.DeepEqual(cfg, again) {
			t.Fatalf("parsing the same document twice differs: %v", err)
		}
	})
}

// FuzzParseExemption checks that any annotation value parses without
// panicking, and that an accepted exemption has a trimmed, non-empty reason
// that is safe to show: valid UTF-8, one line, no control characters, at
// most policy.MaxReasonLength characters and an ellipsis.
func FuzzParseExemption(f *testing.F) {
	for _, s := range []string{
		"", "reason", "reason; expires=2026-03-15", "; expires=2026-03-15", "expires=2026-03-15",
		"a;b;c", "reason; Expires : 2026-02-30", "reason; expires=", "\x00; expires=9999-12-31",
		"ok\nWarning: forged", "\x1b[31mred\x1b[0m; expires=2026-03-15", "\x1b]8;;http://x\x07link", "\xff\xfe",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		e, err := policy.ParseExemption(value)
		if err != nil {
			return
		}
		if e.Reason == "" || strings.TrimSpace(e.Reason) != e.Reason {
			t.Errorf("ParseExemption(%q) reason %q", value, e.Reason)
		}
		if !utf8.ValidString(e.Reason) || strings.ContainsFunc(e.Reason, unicode.IsControl) ||
			utf8.RuneCountInString(e.Reason) > policy.MaxReasonLength+1 {
			t.Errorf("ParseExemption(%q) reason %q is not safe to show", value, e.Reason)
		}
		if !e.Expires.IsZero() && (e.Expires.Hour() != 0 || e.Expires.Location().String() != "UTC") {
			t.Errorf("ParseExemption(%q) expires %v, want midnight UTC", value, e.Expires)
		}
	})
}

// yamlLines counts lines as YAML does: "\r\n", "\r", "\n", NEL, LS and PS
// each break a line.
func yamlLines(data []byte) int {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	n := 1
	for _, r := range s {
		switch r {
		case '\n', '\r', '\u0085', '\u2028', '\u2029':
			n++
		}
	}
	return n
}
