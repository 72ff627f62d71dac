// Package vapsync keeps the ValidatingAdmissionPolicies that package vap
// renders in step with dsguard's policy ConfigMap, by server-side apply
// under dsguard's own field manager.
package vapsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/dsguard/dsguard/vap"
)

// FieldManager owns every field of the generated objects.
const FieldManager = "dsguard"

// Syncer renders the policy ConfigMap into ValidatingAdmissionPolicies and
// bindings whenever it changes, and at least every Interval (exemption
// expiries are judged against the render day, as CEL has no clock). It
// applies them server-side and deletes generated objects a new policy no
// longer needs.
//
// A policy never vanishes: when the ConfigMap is deleted, lacks its key or
// is invalid, the last good policy (LastGood) is rendered instead; without
// one, the applied policies stay as they are. Only when there is neither a
// usable ConfigMap, nor a last good policy, nor any generated policy (a first
// install without a ConfigMap) are the built-in defaults rendered.
type Syncer struct {
	// Client writes the generated objects.
	Client client.Client
	// Reader lists them, uncached (no informer for policies dsguard only writes).
	Reader client.Reader
	// Cache holds the policy ConfigMap (the same informer the loader uses).
	Cache cache.Cache
	// Namespace, Name and Key locate the policy document.
	Namespace, Name, Key string
	// Options are passed to vap.Render; Today is set on each render.
	Options vap.Options
	// Interval bounds the time between renders; 0 means 10 minutes.
	Interval time.Duration
	// LastGood returns the last good policy document (validated by the
	// caller of Render all the same); nil, or an error, means none.
	LastGood func(ctx context.Context) ([]byte, error)
	// Enforced, when set, is told after every sync which rules the API
	// server is known to enforce: those whose generated policies and
	// bindings were applied and then read back. After a failed sync it is
	// told the rules whose generated objects are still in place (none
	// when even that cannot be read), so that vap+webhook mode takes back
	// into the webhook whatever the API server may not enforce.
	Enforced func(rules map[string]bool)
	Log      logr.Logger
}

// errKeep says the policy cannot be rendered and the applied policies stay.
var errKeep = errors.New("the applied ValidatingAdmissionPolicies stay as they are")

// Start runs until ctx ends. It implements manager.Runnable; every replica
// may run it, as applying the same objects is a no-op.
func (s *Syncer) Start(ctx context.Context) error {
	interval := s.Interval
	if interval == 0 {
		interval = 10 * time.Minute
	}
	inf, err := s.Cache.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke,
	}); err != nil {
		return err
	}
	if !s.Cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if err := s.Sync(ctx); err != nil {
			s.Log.Error(err, "keeping the generated ValidatingAdmissionPolicies in step")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

// Sync renders the current policy once and applies the result.
func (s *Syncer) Sync(ctx context.Context) (err error) {
	reported := false
	defer func() {
		if err != nil && !reported {
			s.report(s.inPlace(ctx))
		}
	}()
	cfg, err := s.document(ctx)
	if err != nil {
		return err
	}
	opts := s.Options
	opts.Today = time.Now().UTC()
	res, err := vap.Render(cfg, opts)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for i := range res.Policies {
		for _, obj := range []client.Object{&res.Policies[i], &res.Bindings[i]} {
			if err := s.apply(ctx, obj); err != nil {
				return err
			}
		}
		want[res.Policies[i].Name] = true
	}
	deleted, err := s.prune(ctx, want)
	if err != nil {
		return err
	}
	enforced, err := s.observe(ctx, res)
	if enforced == nil {
		return err
	}
	s.report(enforced)
	reported = true
	if err != nil {
		return err
	}
	s.Log.V(1).Info("generated ValidatingAdmissionPolicies applied", "policies", len(res.Policies), "deleted", deleted, "today", res.Today)
	return nil
}

// document returns the policy to render: the ConfigMap's; when it is
// missing or invalid, the last good policy; when there is none either,
// errKeep if generated policies exist, else the built-in defaults.
func (s *Syncer) document(ctx context.Context) (*policy.Config, error) {
	var cm corev1.ConfigMap
	var cause error
	err := s.Cache.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		cause = fmt.Errorf("policy ConfigMap %s/%s does not exist", s.Namespace, s.Name)
	case err != nil:
		return nil, err
	default:
		data, ok := cm.Data[s.Key]
		if !ok {
			cause = fmt.Errorf("policy ConfigMap %s/%s has no key %q", s.Namespace, s.Name, s.Key)
			break
		}
		cfg, err := rules.Builtin().ParseConfig([]byte(data))
		if err == nil {
			return cfg, nil
		}
		cause = fmt.Errorf("policy ConfigMap %s/%s is invalid: %w", s.Namespace, s.Name, err)
	}
	if s.LastGood != nil {
		doc, err := s.LastGood(ctx)
		if err == nil {
			cfg, perr := rules.Builtin().ParseConfig(doc)
			if perr == nil {
				s.Log.Info("rendering the last good policy", "reason", cause.Error())
				return cfg, nil
			}
			err = perr
		}
		s.Log.V(1).Info("no usable last good policy", "reason", err.Error())
	}
	names, err := s.generated(ctx)
	if err != nil {
		return nil, err
	}
	if len(names) > 0 {
		return nil, fmt.Errorf("%w: %w, and there is no last good policy", errKeep, cause)
	}
	s.Log.Info("rendering the built-in defaults: no policy ConfigMap, no last good policy and no generated policies yet", "reason", cause.Error())
	return rules.Builtin().DefaultConfig(), nil
}

// generated returns the rule of every generated ValidatingAdmissionPolicy
// in place, by name.
func (s *Syncer) generated(ctx context.Context) (map[string]string, error) {
	var policies admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := s.Reader.List(ctx, &policies, client.MatchingLabels{vap.ManagedByLabel: vap.ManagedByValue}); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(policies.Items))
	for _, p := range policies.Items {
		out[p.Name] = p.Labels[vap.RuleLabel]
	}
	return out, nil
}

// observe reads back every policy and binding just applied: a rule counts
// as enforced by the API server only when all its generated policies are
// there as rendered and each is bound as rendered. Server-side apply takes
// back the fields dsguard owns but leaves what another writer added (a
// match condition that never matches, an excluded resource), so a policy or
// binding that differs from its render in any field is restored whole, by
// an update of the version read, and read back again.
//
// A restore that fails leaves its rule out of the enforced set, which is
// returned with the errors; only when the objects cannot be read is the set
// nil.
func (s *Syncer) observe(ctx context.Context, res *vap.Result) (map[string]bool, error) {
	enforced := map[string]bool{}
	missing := map[string]bool{}
	var errs []error
	for i := range res.Policies {
		want, wantBinding := &res.Policies[i], &res.Bindings[i]
		rule := want.Labels[vap.RuleLabel]
		got, err := s.readBack(ctx, want, &admissionregistrationv1.ValidatingAdmissionPolicy{})
		if err != nil && !errors.Is(err, errRestore) {
			return nil, err
		}
		errs = append(errs, err)
		binding, err := s.readBack(ctx, wantBinding, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{})
		if err != nil && !errors.Is(err, errRestore) {
			return nil, err
		}
		errs = append(errs, err)
		if got && binding {
			enforced[rule] = true
		} else {
			missing[rule] = true
		}
	}
	for rule := range missing {
		delete(enforced, rule)
	}
	return enforced, errors.Join(errs...)
}

// errRestore marks a generated object that differs from its render and
// could not be restored.
var errRestore = errors.New("restoring a generated object")

// readBack reads want's object into got and reports whether it is as
// rendered, restoring it first when it is not.
func (s *Syncer) readBack(ctx context.Context, want, got client.Object) (bool, error) {
	for attempt := 0; ; attempt++ {
		if err := s.Reader.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
			return false, fmt.Errorf("reading back %s: %w", want.GetName(), err)
		}
		diff := differs(want, got)
		if diff == "" {
			return true, nil
		}
		if attempt > 0 {
			s.Log.Error(nil, "a generated object still differs from its render after being restored", "name", want.GetName(), "field", diff)
			return false, nil
		}
		s.Log.Info("restoring a generated object changed outside dsguard", "kind", fmt.Sprintf("%T", got), "name", want.GetName(), "field", diff)
		if err := s.Client.Update(ctx, restored(want, got), client.FieldOwner(FieldManager)); err != nil {
			return false, fmt.Errorf("%w %s (%s changed outside dsguard): %w", errRestore, want.GetName(), diff, err)
		}
	}
}

// differs names the first part of got, a generated policy or binding as the
// API server holds it, that is not as want renders it (its spec, or a label
// or annotation dsguard sets); "" when none. Render spells out the API
// server's defaults, so that a spec as rendered reads back equal.
func differs(want, got client.Object) string {
	for k, v := range want.GetLabels() {
		if got.GetLabels()[k] != v {
			return "metadata.labels[" + k + "]"
		}
	}
	for k, v := range want.GetAnnotations() {
		if got.GetAnnotations()[k] != v {
			return "metadata.annotations[" + k + "]"
		}
	}
	if !equality.Semantic.DeepEqual(specOf(want), specOf(got)) {
		return "spec"
	}
	return ""
}

// specOf is the spec of a generated policy or binding.
func specOf(obj client.Object) any {
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		return &o.Spec
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		return &o.Spec
	}
	return obj
}

// restored is want at got's version, with the labels and annotations got
// has besides dsguard's: the update that restores it fails if it changed
// meanwhile, and keeps what others may add there.
func restored(want, got client.Object) client.Object {
	obj := want.DeepCopyObject().(client.Object)
	obj.SetResourceVersion(got.GetResourceVersion())
	merged := func(theirs, ours map[string]string) map[string]string {
		out := maps.Clone(theirs)
		if out == nil {
			out = map[string]string{}
		}
		maps.Copy(out, ours)
		return out
	}
	obj.SetLabels(merged(got.GetLabels(), want.GetLabels()))
	obj.SetAnnotations(merged(got.GetAnnotations(), want.GetAnnotations()))
	return obj
}

// inPlace is what the API server still enforces after a failed sync: the
// rules of the generated policies in place, none when they cannot be read.
func (s *Syncer) inPlace(ctx context.Context) map[string]bool {
	out := map[string]bool{}
	names, err := s.generated(ctx)
	if err != nil {
		return out
	}
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := s.Reader.List(ctx, &bindings, client.MatchingLabels{vap.ManagedByLabel: vap.ManagedByValue}); err != nil {
		return out
	}
	bound := map[string]bool{}
	for _, b := range bindings.Items {
		bound[b.Spec.PolicyName] = true
	}
	unbound := map[string]bool{}
	for name, rule := range names {
		switch {
		case rule == "":
		case bound[name]:
			out[rule] = true
		default:
			unbound[rule] = true
		}
	}
	for rule := range unbound {
		delete(out, rule)
	}
	return out
}

func (s *Syncer) report(enforced map[string]bool) {
	if s.Enforced != nil {
		s.Enforced(enforced)
	}
}

func (s *Syncer) apply(ctx context.Context, obj client.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	if err := s.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// prune deletes generated bindings and policies whose names are not wanted.
func (s *Syncer) prune(ctx context.Context, want map[string]bool) (int, error) {
	sel := client.MatchingLabels{vap.ManagedByLabel: vap.ManagedByValue}
	n := 0
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := s.Reader.List(ctx, &bindings, sel); err != nil {
		return n, err
	}
	for i := range bindings.Items {
		if !want[bindings.Items[i].Name] {
			if err := client.IgnoreNotFound(s.Client.Delete(ctx, &bindings.Items[i])); err != nil {
				return n, err
			}
			n++
		}
	}
	var policies admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := s.Reader.List(ctx, &policies, sel); err != nil {
		return n, err
	}
	for i := range policies.Items {
		if !want[policies.Items[i].Name] {
			if err := client.IgnoreNotFound(s.Client.Delete(ctx, &policies.Items[i])); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
