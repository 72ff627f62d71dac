package vap

import (
	"slices"
	"testing"

	"github.com/dsguard/dsguard/policy/rules"
)

// TestPossibleNames_CoverEveryRender: every name a render produces, for
// every rule at every action with namespace tiers of every action, is one
// of PossibleNames (the chart grants dsguard those names and no others).
func TestPossibleNames_CoverEveryRender(t *testing.T) {
	possible := PossibleNames()
	seen := map[string]bool{}
	for _, action := range []string{"deny", "warn", "audit"} {
		for _, ratcheting := range []string{"true", "false"} {
			doc := "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nratcheting: " + ratcheting + "\n" +
				"namespaceEnforcement:\n- {namespaces: [kube-system], enforcement: warn}\n- {namespaces: [legacy], enforcement: audit}\nrules:\n"
			for _, r := range rules.Builtin().Rules() {
				if Renders(r.ID) {
					doc += "  " + r.ID + ": {action: " + action + "}\n"
				}
			}
			cfg, err := rules.Builtin().ParseConfig([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Render(cfg, Options{Namespace: "dsguard-system"})
			if err != nil {
				t.Fatal(err)
			}
			for i := range res.Policies {
				for _, name := range []string{res.Policies[i].Name, res.Bindings[i].Name} {
					seen[name] = true
					if !slices.Contains(possible, name) {
						t.Errorf("rendered %s, which PossibleNames lacks", name)
					}
				}
			}
		}
	}
	// Some rules never cap a check below their action (no -deny-warn for
	// them): PossibleNames may list a few names no render makes, all of
	// them dsguard's own.
	if len(seen) == 0 {
		t.Fatal("nothing rendered")
	}
}
