// Package vapsync keeps the ValidatingAdmissionPolicies that package vap
// renders in step with dsguard's policy ConfigMap, by server-side apply
// under dsguard's own field manager.
package vapsync

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
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
// longer needs. An invalid ConfigMap leaves the applied policies as they
// are, as the webhook keeps its last good policy.
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
	Log      logr.Logger
}

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
func (s *Syncer) Sync(ctx context.Context) error {
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
	s.Log.V(1).Info("generated ValidatingAdmissionPolicies applied", "policies", len(res.Policies), "deleted", deleted, "today", res.Today)
	return nil
}

// document returns the policy in the ConfigMap, or the built-in defaults
// when there is none.
func (s *Syncer) document(ctx context.Context) (*policy.Config, error) {
	var cm corev1.ConfigMap
	err := s.Cache.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, &cm)
	if apierrors.IsNotFound(err) {
		return rules.Builtin().DefaultConfig(), nil
	}
	if err != nil {
		return nil, err
	}
	data, ok := cm.Data[s.Key]
	if !ok {
		return rules.Builtin().DefaultConfig(), nil
	}
	cfg, err := rules.Builtin().ParseConfig([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("policy ConfigMap %s/%s is invalid, the applied policies stay as they are: %w", s.Namespace, s.Name, err)
	}
	return cfg, nil
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
