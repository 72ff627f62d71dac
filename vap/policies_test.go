package vap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// policiesDir holds the policy documents the tests render, shared with the
// differential e2e (test/e2e/vap): the defaults, and documents that change
// actions, scopes and exemptions.
const policiesDir = "testdata/policies"

// testPolicies returns the parsed test policy documents by file name.
func testPolicies(t *testing.T) map[string]*policy.Config {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(policiesDir, "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("want at least 4 policies in %s, got %d (%v)", policiesDir, len(files), err)
	}
	out := map[string]*policy.Config{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := rules.Builtin().ParseConfig(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".yaml")] = cfg
	}
	return out
}
