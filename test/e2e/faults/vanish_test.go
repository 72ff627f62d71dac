package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// lastGoodName is the record of the last good policy (clusterview.LastGoodSuffix).
const lastGoodName = "dsguard-policy-last-good"

// TestPolicyVanishes_ARestartedReplicaServesTheLastGoodPolicy deletes the
// policy ConfigMap and restarts a replica: the new replica must serve the
// last good policy (not the built-in defaults), report Degraded (metric and
// Event) and say so in a warning on its responses. A DaemonSet author cannot
// write the record; a record changed by hand is refused (the defaults,
// loudly, not the changed document).
func TestPolicyVanishes_ARestartedReplicaServesTheLastGoodPolicy(t *testing.T) {
	ctx := t.Context()
	ds := example(t, "node-exporter-tolerations.yaml", "default")
	ds.Name = "vanish-probe"
	five := intstr.FromInt32(5000)
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &five
	direct := newDirectReviewer(t, ds)
	cms := kube.CoreV1().ConfigMaps(framework.Namespace)
	t.Cleanup(func() { recreatePolicy(t) })

	// Version 7 is loaded by both replicas and recorded.
	if err := setPolicy(ctx, policyVersion(7)); err != nil {
		t.Fatal(err)
	}
	for _, r := range cluster.Replicas().Members() {
		waitFor(t, r.Name+" loads version 7", 30*time.Second, func() (bool, string) {
			v, err := direct.review(r)
			if err != nil {
				return false, err.Error()
			}
			n, err := versionOf(v)
			return err == nil && n == 7, fmt.Sprint(n, err)
		})
	}
	waitFor(t, "the last good policy recorded", 30*time.Second, func() (bool, string) {
		cm, err := cms.Get(ctx, lastGoodName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return cm.Data["policy.yaml"] == policyVersion(7) && cm.Data["sha256"] != "", fmt.Sprint(cm.Data)
	})

	// A DaemonSet author (edit in their own namespace) cannot forge it.
	author := impersonating(t, "ds-author", "default")
	forged := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: framework.Namespace, Name: lastGoodName},
		Data: map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: audit\n"}}
	if _, err := author.CoreV1().ConfigMaps(framework.Namespace).Update(ctx, forged, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a DaemonSet author updating the last good policy: want Forbidden, got %v", err)
	}
	if err := author.CoreV1().ConfigMaps(framework.Namespace).Delete(ctx, lastGoodName, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a DaemonSet author deleting the last good policy: want Forbidden, got %v", err)
	}

	// The policy ConfigMap goes; a replica restarts.
	if err := cms.Delete(ctx, "dsguard-policy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	old := cluster.Replicas().Members()[0]
	fresh, err := cluster.Replicas().Replace(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	v, err := direct.review(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := versionOf(v); err != nil || n != 7 {
		t.Errorf("%s started without the policy ConfigMap: want version 7 (the last good policy), got %d, %v", fresh.Name, n, err)
	}
	if !slices.ContainsFunc(v.warnings, func(w string) bool {
		return strings.HasPrefix(w, "dsguard: policy Degraded, judged by the last good policy")
	}) {
		t.Errorf("no Degraded warning on %s's response: %q", fresh.Name, v.warnings)
	}
	if d, err := fresh.Metric("dsguard_policy_degraded"); err != nil || d != 1 {
		t.Errorf("%s: dsguard_policy_degraded = %v (%v), want 1", fresh.Name, d, err)
	}
	waitFor(t, "a LastGoodPolicy Event", 30*time.Second, func() (bool, string) {
		evs, err := kube.EventsV1().Events(framework.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=LastGoodPolicy"})
		if err != nil {
			return false, err.Error()
		}
		return len(evs.Items) > 0, "none"
	})
	t.Logf("figures: %s serves the last good policy with %q", fresh.Name, v.warnings)

	// The record changed by hand (its digest no longer matches): the next
	// replica refuses it and serves the defaults, Degraded, saying so.
	cm, err := cms.Get(ctx, lastGoodName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["policy.yaml"] = policyVersion(99)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	again, err := cluster.Replicas().Replace(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	v, err = direct.review(again)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := versionOf(v); err == nil {
		t.Errorf("%s served version %d from a record changed by hand, want the built-in defaults", again.Name, n)
	}
	if !slices.ContainsFunc(v.warnings, func(w string) bool {
		return strings.HasPrefix(w, "dsguard: policy Degraded, judged by built-in defaults")
	}) {
		t.Errorf("no Degraded warning naming the defaults on %s's response: %q", again.Name, v.warnings)
	}
}

// recreatePolicy puts a valid policy ConfigMap back (a later write of it
// records a good last policy again).
func recreatePolicy(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: framework.Namespace, Name: "dsguard-policy",
			Labels: map[string]string{"dsguard.io/policy": "true"}},
		Data: map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: enforce\n"},
	}
	_, err := kube.CoreV1().ConfigMaps(framework.Namespace).Create(context.Background(), cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = setPolicy(context.Background(), cm.Data["policy.yaml"])
	}
	if err != nil {
		t.Errorf("restoring the policy ConfigMap: %v", err)
	}
}

// impersonating returns a client acting as user, who holds the built-in
// edit role in namespace, as a DaemonSet author would.
func impersonating(t *testing.T, user, namespace string) kubernetes.Interface {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user + "-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	cluster.DeleteOnCleanup(t, "rolebinding", "-n", namespace, rb.Name)
	if _, err := kube.RbacV1().RoleBindings(namespace).Create(t.Context(), rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg := cluster.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
