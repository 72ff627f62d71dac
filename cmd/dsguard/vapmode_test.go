package main

import (
	"testing"

	"github.com/go-logr/logr"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/policy"
)

// TestDelegation_OnlyWhatTheAPIServerEnforces: in vap+webhook mode the
// webhook turns a rule off only while the sync reports its generated
// policies applied and read back; after a failed apply it enforces the rule
// again.
func TestDelegation_OnlyWhatTheAPIServerEnforces(t *testing.T) {
	src := clusterview.NewPolicySource(nil)
	d := &delegation{source: src, log: logr.Discard()}
	src.Adjust = d.adjust
	if err := src.Load([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"), "cm"); err != nil {
		t.Fatal(err)
	}
	action := func(id string) policy.Action {
		a, _ := src.Current().Policy.RuleAction(id)
		return a
	}
	steps := []struct {
		name     string
		enforced map[string]bool // nil: no report yet
		want     map[string]policy.Action
	}{
		{"before the first sync the webhook enforces every rule", nil,
			map[string]policy.Action{"surge-host-port": policy.ActionDeny, "privileged": policy.ActionWarn}},
		{"both applied and read back", map[string]bool{"surge-host-port": true, "privileged": true, "control-plane-toleration": true},
			map[string]policy.Action{"surge-host-port": policy.ActionOff, "privileged": policy.ActionOff,
				"control-plane-toleration": policy.ActionDeny, "node-coverage": policy.ActionDeny}},
		{"surge-host-port's apply failed", map[string]bool{"privileged": true},
			map[string]policy.Action{"surge-host-port": policy.ActionDeny, "privileged": policy.ActionOff}},
		{"nothing readable", map[string]bool{},
			map[string]policy.Action{"surge-host-port": policy.ActionDeny, "privileged": policy.ActionWarn}},
	}
	for _, s := range steps {
		if s.enforced != nil {
			d.set(s.enforced)
		}
		for id, want := range s.want {
			if got := action(id); got != want {
				t.Errorf("%s: %s is %s in the webhook, want %s", s.name, id, got, want)
			}
		}
		if ws := src.Current().Policy.Weaknesses(); len(ws) > 0 {
			t.Errorf("%s: delegated rules count as weaknesses: %v", s.name, ws)
		}
	}
}
