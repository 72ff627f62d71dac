package vapsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dsguard/dsguard/vap"
)

// clientCache serves the Syncer's cache reads from a client.
type clientCache struct {
	cache.Cache
	c client.Client
}

func (cc clientCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return cc.c.Get(ctx, key, obj, opts...)
}

const header = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"

// generatedState is what the API server holds: each generated policy's name
// with its validations and each binding's actions.
func generatedState(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	sel := client.MatchingLabels{vap.ManagedByLabel: vap.ManagedByValue}
	var policies admissionregistrationv1.ValidatingAdmissionPolicyList
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := c.List(t.Context(), &policies, sel); err != nil {
		t.Fatal(err)
	}
	if err := c.List(t.Context(), &bindings, sel); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range policies.Items {
		var exprs []string
		for _, v := range p.Spec.Validations {
			exprs = append(exprs, v.Expression)
		}
		out["policy/"+p.Name] = strings.Join(exprs, "\n")
	}
	for _, b := range bindings.Items {
		out["binding/"+b.Name] = b.Spec.PolicyName + fmt.Sprint(b.Spec.ValidationActions)
	}
	return out
}

func TestSyncer_AnInvalidOrDeletedConfigMapKeepsTheLastPolicies(t *testing.T) {
	// A policy different from the defaults, so that falling back to them
	// shows: privileged only warns, image-pinned denies.
	const good = header + "rules:\n  privileged: {action: warn}\n  image-pinned: {action: deny}\n"
	policyCM := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "dsguard-system", Name: "dsguard-policy"}, Data: data}
	}
	tests := []struct {
		name string
		// change breaks the ConfigMap after the first sync.
		change func(t *testing.T, c client.Client)
		// lastGood is the recorded last good policy ("" for none).
		lastGood string
		wantErr  bool
	}{
		{"the policy is invalid", func(t *testing.T, c client.Client) {
			if err := c.Update(t.Context(), policyCM(map[string]string{"policy.yaml": header + "enforcement: sometimes\n"})); err != nil {
				t.Fatal(err)
			}
		}, "", true},
		{"the key is gone", func(t *testing.T, c client.Client) {
			if err := c.Update(t.Context(), policyCM(map[string]string{"other": "x"})); err != nil {
				t.Fatal(err)
			}
		}, "", true},
		{"the ConfigMap is deleted", func(t *testing.T, c client.Client) {
			if err := c.Delete(t.Context(), policyCM(nil)); err != nil {
				t.Fatal(err)
			}
		}, "", true},
		{"the ConfigMap is deleted, the last good policy is recorded", func(t *testing.T, c client.Client) {
			if err := c.Delete(t.Context(), policyCM(nil)); err != nil {
				t.Fatal(err)
			}
		}, good, false},
		{"the policy is invalid, the last good policy is recorded", func(t *testing.T, c client.Client) {
			if err := c.Update(t.Context(), policyCM(map[string]string{"policy.yaml": header + "enforcement: sometimes\n"})); err != nil {
				t.Fatal(err)
			}
		}, good, false},
		{"the policy is invalid, the recorded last good policy is too", func(t *testing.T, c client.Client) {
			if err := c.Update(t.Context(), policyCM(map[string]string{"policy.yaml": header + "enforcement: sometimes\n"})); err != nil {
				t.Fatal(err)
			}
		}, header + "rules: {nope: {}}\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(policyCM(map[string]string{"policy.yaml": good})).Build()
			var told []map[string]bool
			s := &Syncer{Client: c, Reader: c, Cache: clientCache{c: c},
				Namespace: "dsguard-system", Name: "dsguard-policy", Key: "policy.yaml",
				Options: vap.Options{Namespace: "dsguard-system"}, Log: logr.Discard(),
				Enforced: func(r map[string]bool) { told = append(told, r) }}
			if tt.lastGood != "" {
				s.LastGood = func(context.Context) ([]byte, error) { return []byte(tt.lastGood), nil }
			}
			if err := s.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			before := generatedState(t, c)
			if len(before) == 0 {
				t.Fatal("the first sync generated nothing")
			}
			if !strings.Contains(strings.Join(slices.Collect(maps.Keys(before)), " "), "policy/dsguard-image-pinned-deny") {
				t.Fatalf("the first sync did not render the ConfigMap's policy: %v", slices.Sorted(maps.Keys(before)))
			}
			tt.change(t, c)
			err := s.Sync(t.Context())
			if (err != nil) != tt.wantErr {
				t.Errorf("second sync: err %v, want an error: %v", err, tt.wantErr)
			}
			after := generatedState(t, c)
			if !maps.Equal(before, after) {
				t.Errorf("the generated policies changed:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
			}
			// The webhook is told the API server still enforces every
			// rule it did.
			if len(told) != 2 || !maps.Equal(told[0], told[1]) || !told[0]["image-pinned"] || !told[0]["privileged"] {
				t.Errorf("enforced rules reported %v, want the same set twice, with image-pinned and privileged", told)
			}
		})
	}
}

// TestSyncer_FirstInstallWithoutAConfigMap: with no ConfigMap, no last good
// policy and nothing generated yet, the built-in defaults are rendered.
func TestSyncer_FirstInstallWithoutAConfigMap(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	s := &Syncer{Client: c, Reader: c, Cache: clientCache{c: c},
		Namespace: "dsguard-system", Name: "dsguard-policy", Key: "policy.yaml",
		Options: vap.Options{Namespace: "dsguard-system"}, Log: logr.Discard()}
	if err := s.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := generatedState(t, c); got["policy/dsguard-surge-host-port-deny"] == "" {
		t.Errorf("the defaults deny surge-host-port; generated: %v", slices.Sorted(maps.Keys(got)))
	}
}

// TestSyncer_AFailedApplyIsNotReportedAsEnforced: a rule whose generated
// policy could not be applied is not reported as enforced by the API
// server, so vap+webhook mode keeps it in the webhook.
func TestSyncer_AFailedApplyIsNotReportedAsEnforced(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "dsguard-system", Name: "dsguard-policy"},
		Data: map[string]string{"policy.yaml": header}}
	base := fake.NewClientBuilder().WithObjects(cm).Build()
	failing := failApply{Client: base, name: "dsguard-image-pinned-warn"}
	var told []map[string]bool
	s := &Syncer{Client: failing, Reader: base, Cache: clientCache{c: base},
		Namespace: "dsguard-system", Name: "dsguard-policy", Key: "policy.yaml",
		Options: vap.Options{Namespace: "dsguard-system"}, Log: logr.Discard(),
		Enforced: func(r map[string]bool) { told = append(told, r) }}
	if err := s.Sync(t.Context()); err == nil {
		t.Fatal("the apply failed, the sync did not say so")
	}
	if len(told) != 1 || told[0]["image-pinned"] {
		t.Errorf("enforced rules reported %v, want image-pinned left to the webhook", told)
	}
	// Once the apply goes through, it is reported.
	s.Client = base
	if err := s.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(told) != 2 || !told[1]["image-pinned"] {
		t.Errorf("enforced rules reported %v, want image-pinned enforced after a good sync", told)
	}
}

// failApply fails the server-side apply of one object.
type failApply struct {
	client.Client
	name string
}

func (f failApply) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if u, ok := obj.(interface{ GetName() string }); ok && u.GetName() == f.name {
		return errors.New("the API server refused the apply")
	}
	return f.Client.Apply(ctx, obj, opts...)
}

// TestSyncer_AChangedGeneratedObjectIsRestored: server-side apply leaves
// what another writer added to a generated object, so each sync compares the
// whole object with its render and restores it. A change the restore cannot
// undo leaves the rule to the webhook.
func TestSyncer_AChangedGeneratedObjectIsRestored(t *testing.T) {
	const name = "dsguard-surge-host-port-deny"
	tests := []struct {
		name   string
		tamper func(p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		// binding: the change is to the binding.
		binding bool
	}{
		{"a match condition that never matches", func(p *admissionregistrationv1.ValidatingAdmissionPolicy, _ *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConditions = append(p.Spec.MatchConditions, admissionregistrationv1.MatchCondition{Name: "tampered", Expression: "false"})
		}, false},
		{"an excluded resource", func(p *admissionregistrationv1.ValidatingAdmissionPolicy, _ *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConstraints.ExcludeResourceRules = p.Spec.MatchConstraints.ResourceRules
		}, false},
		{"a namespace selector that picks none", func(p *admissionregistrationv1.ValidatingAdmissionPolicy, _ *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"none": "none"}}
		}, false},
		{"the rule label removed", func(p *admissionregistrationv1.ValidatingAdmissionPolicy, _ *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			delete(p.Labels, vap.RuleLabel)
		}, false},
		{"the binding narrowed", func(_ *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"none": "none"}}}
		}, true},
		{"the binding only audits", func(_ *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "dsguard-system", Name: "dsguard-policy"},
				Data: map[string]string{"policy.yaml": header}}
			base := fake.NewClientBuilder().WithObjects(cm).Build()
			var told []map[string]bool
			s := &Syncer{Client: base, Reader: base, Cache: clientCache{c: base},
				Namespace: "dsguard-system", Name: "dsguard-policy", Key: "policy.yaml",
				Options: vap.Options{Namespace: "dsguard-system"}, Log: logr.Discard(),
				Enforced: func(r map[string]bool) { told = append(told, r) }}
			if err := s.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			read := func() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
				var p admissionregistrationv1.ValidatingAdmissionPolicy
				var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
				if err := base.Get(t.Context(), client.ObjectKey{Name: name}, &p); err != nil {
					t.Fatal(err)
				}
				if err := base.Get(t.Context(), client.ObjectKey{Name: name}, &b); err != nil {
					t.Fatal(err)
				}
				return &p, &b
			}
			rendered, renderedBinding := read()
			p, b := read()
			tc.tamper(p, b)
			var changed client.Object = p
			if tc.binding {
				changed = b
			}
			if err := base.Update(t.Context(), changed); err != nil {
				t.Fatal(err)
			}
			// The apply that would follow keeps the change (as server-side
			// apply keeps fields another manager added).
			s.Client = keepsApply{base}
			if err := s.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			p, b = read()
			if d := differs(rendered, p); d != "" {
				t.Errorf("the policy was not restored: %s differs", d)
			}
			if d := differs(renderedBinding, b); d != "" {
				t.Errorf("the binding was not restored: %s differs", d)
			}
			if len(told) != 2 || !told[1]["surge-host-port"] {
				t.Errorf("enforced rules reported %v, want surge-host-port enforced once restored", told)
			}

			// A restore that the API server refuses: the rule goes back to
			// the webhook.
			p, b = read()
			tc.tamper(p, b)
			changed = p
			if tc.binding {
				changed = b
			}
			if err := base.Update(t.Context(), changed); err != nil {
				t.Fatal(err)
			}
			s.Client = refusesUpdate{keepsApply{base}}
			if err := s.Sync(t.Context()); err == nil {
				t.Error("the restore was refused, the sync did not say so")
			}
			if len(told) != 3 || told[2]["surge-host-port"] || !told[2]["privileged"] {
				t.Errorf("enforced rules reported %v, want surge-host-port left to the webhook", told)
			}
		})
	}
}

// keepsApply applies nothing: what is stored stays.
type keepsApply struct{ client.Client }

func (keepsApply) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return nil
}

// refusesUpdate fails every update.
type refusesUpdate struct{ client.Client }

func (refusesUpdate) Update(context.Context, client.Object, ...client.UpdateOption) error {
	return errors.New("the API server refused the update")
}
