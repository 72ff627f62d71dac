package vap

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

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
				"exemptions: {allowedGroups: [platform-team]}\n" +
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
			res, err := Render(cfg, Options{Namespace: "dsguard-system", FailOpenNamespaces: []string{"kube-system"}})
			if err != nil {
				t.Fatal(err)
			}
			for i := range res.Policies {
				// The static confinement pins each binding's action and
				// each policy's failure policy to its name.
				p, b := &res.Policies[i], &res.Bindings[i]
				want, ok := NameAction(p.Name)
				if !ok || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{want}) {
					t.Errorf("%s is bound with %v; its name says %q", p.Name, b.Spec.ValidationActions, want)
				}
				if want != admissionregistrationv1.Deny && *p.Spec.FailurePolicy != admissionregistrationv1.Ignore {
					t.Errorf("%s (%s) has failurePolicy %s; only a deny policy may fail closed", p.Name, want, *p.Spec.FailurePolicy)
				}
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
	// them dsguard's own. The exemption gate's are all made.
	if len(seen) == 0 {
		t.Fatal("nothing rendered")
	}
	for _, s := range GateSuffixes {
		if name := NamePrefix + GateName + "-" + s; !seen[name] {
			t.Errorf("no render made %s", name)
		}
	}
}

// TestPossibleNames_TheChartGrantsTheSame: the chart's RBAC and confining
// policy list the generated names from three lists in _helpers.tpl (rules,
// their suffixes, the exemption gate's suffixes); they must be the ones
// PossibleNames is made of.
func TestPossibleNames_TheChartGrantsTheSame(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "charts", "dsguard", "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	tpl := string(data)
	start := strings.Index(tpl, `define "dsguard.generatedPolicyNames"`)
	if start < 0 {
		t.Fatal(`_helpers.tpl has no "dsguard.generatedPolicyNames"`)
	}
	lists := regexp.MustCompile(`range \$[rsg] := list ((?:"[^"]+" ?)+)`).FindAllStringSubmatch(tpl[start:], 3)
	if len(lists) != 3 {
		t.Fatalf("want the rules', the suffixes' and the gate's lists, found %d", len(lists))
	}
	if !strings.Contains(tpl[start:], "- dsguard-"+GateName+"-{{ $g }}") {
		t.Errorf("the chart does not name the gate's policies dsguard-%s-<suffix>", GateName)
	}
	words := func(s string) []string { return strings.Fields(strings.ReplaceAll(s, `"`, " ")) }
	var ids []string
	for _, r := range rules.Builtin().Rules() {
		if Renders(r.ID) {
			ids = append(ids, r.ID)
		}
	}
	if got := words(lists[0][1]); !slices.Equal(got, ids) {
		t.Errorf("the chart's rules %v, want %v", got, ids)
	}
	if got := words(lists[1][1]); !slices.Equal(got, NameSuffixes) {
		t.Errorf("the chart's suffixes %v, want %v", got, NameSuffixes)
	}
	if got := words(lists[2][1]); !slices.Equal(got, GateSuffixes) {
		t.Errorf("the chart's exemption gate suffixes %v, want %v", got, GateSuffixes)
	}
}
