package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/policy"
)

// TestLoadPolicyDocument: --config takes the policy in each form a user has
// at hand, and refuses an invalid one in any of them, naming the file.
func TestLoadPolicyDocument(t *testing.T) {
	dir := t.TempDir()
	doc := "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: warn\n"
	bad := "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: loud\n"
	indent := func(s string) string {
		return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
	}
	files := map[string]string{
		"policy.yaml":        doc,
		"configmap.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dsguard-policy}\ndata:\n  policy.yaml: |\n" + indent(doc),
		"values.yaml":        "replicaCount: 2\npolicy:\n" + strings.ReplaceAll("  "+strings.TrimSuffix(doc, "\n"), "\n", "\n  ") + "\n",
		"bad-values.yaml":    "policy:\n" + strings.ReplaceAll("  "+strings.TrimSuffix(bad, "\n"), "\n", "\n  ") + "\n",
		"bad-configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dsguard-policy}\ndata:\n  other.yaml: x\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		file, wantErr string
		want          policy.Enforcement
	}{
		{file: "", want: policy.EnforcementEnforce},
		{file: "policy.yaml", want: policy.EnforcementWarn},
		{file: "configmap.yaml", want: policy.EnforcementWarn},
		{file: "values.yaml", want: policy.EnforcementWarn},
		{file: "../../charts/dsguard/values.yaml", want: policy.EnforcementEnforce},
		{file: "bad-values.yaml", wantErr: "bad-values.yaml (the chart's policy value)"},
		{file: "bad-configmap.yaml", wantErr: `has no key "policy.yaml"`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := tc.file
			if path != "" && !strings.HasPrefix(path, "..") {
				path = filepath.Join(dir, path)
			}
			cfg, err := loadPolicyDocument(path, "policy.yaml", nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Enforcement != tc.want {
				t.Errorf("enforcement %q, want %q", cfg.Enforcement, tc.want)
			}
		})
	}
}
