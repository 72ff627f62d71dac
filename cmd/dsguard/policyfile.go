package main

import (
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// policyFileUsage describes --config wherever a command takes it.
const policyFileUsage = "policy file: a PolicyConfig document, the dsguard-policy ConfigMap, or the chart's values " +
	"file (- for standard input); built-in defaults when not set"

// loadPolicyDocument reads the policy a --config flag names, in any of the
// forms a user has at hand, and validates it like the webhook does:
//
//   - a PolicyConfig document;
//   - the dsguard-policy ConfigMap (kubectl get configmap -o yaml), its key
//     key holding the document;
//   - the chart's values file, its policy value holding the document.
//
// An empty file name is the built-in default policy; "-" reads stdin.
func loadPolicyDocument(file, key string, stdin io.Reader) (*policy.Config, error) {
	if file == "" {
		return rules.Builtin().DefaultConfig(), nil
	}
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	var head struct {
		Kind   string         `json:"kind"`
		Policy map[string]any `json:"policy"`
	}
	if err := yaml.Unmarshal(data, &head); err == nil {
		switch {
		case head.Kind == "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.Unmarshal(data, &cm); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			doc, ok := cm.Data[key]
			if !ok {
				return nil, fmt.Errorf("%s: ConfigMap %s has no key %q", file, cm.Name, key)
			}
			data = []byte(doc)
		case head.Kind == "" && head.Policy != nil:
			// The chart's values: its policy value is the document.
			if data, err = yaml.Marshal(head.Policy); err != nil {
				return nil, fmt.Errorf("%s: policy: %w", file, err)
			}
			file += " (the chart's policy value)"
		}
	}
	cfg, err := rules.Builtin().ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cfg, nil
}

// loadPolicy is loadPolicyDocument, compiled.
func loadPolicy(file, key string, stdin io.Reader) (*policy.Policy, error) {
	cfg, err := loadPolicyDocument(file, key, stdin)
	if err != nil {
		return nil, err
	}
	p, err := policy.Compile(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}
