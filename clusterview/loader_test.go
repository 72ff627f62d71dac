package clusterview

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
)

func TestPolicyLoader_Apply(t *testing.T) {
	ref := PolicyRef{Namespace: "dsguard-system", Name: "dsguard-policy", Key: "policy.yaml"}
	cm := func(rv string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "dsguard-system", Name: ref.Name, ResourceVersion: rv}, Data: data}
	}
	src := NewPolicySource(NewPolicyMetrics(prometheus.NewRegistry()))
	rec := events.NewFakeRecorder(10)
	l := &PolicyLoader{Ref: ref, Source: src, Recorder: rec, Log: logr.Discard()}
	event := func() string {
		select {
		case e := <-rec.Events:
			return e
		default:
			return ""
		}
	}

	// A broken ConfigMap at start-up: defaults are served, degraded, Event.
	l.apply(cm("1", map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcment: warn\n"}))
	if a := src.Current(); a == nil || !strings.HasPrefix(a.Origin, "built-in defaults") || src.Degraded() == nil {
		t.Fatalf("after an invalid first policy: active %+v, degraded %v", a, src.Degraded())
	}
	if e := event(); !strings.Contains(e, "Warning InvalidPolicy") || !strings.Contains(e, `line 3: unknown field "enforcment"`) {
		t.Errorf("event = %q", e)
	}

	// A good one replaces it.
	l.apply(cm("2", map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: warn\n"}))
	good := src.Current()
	if src.Degraded() != nil || good.Policy.Enforcement() != "warn" {
		t.Fatalf("good policy not active: %+v degraded=%v", good, src.Degraded())
	}
	if e := event(); !strings.Contains(e, "Normal PolicyLoaded") {
		t.Errorf("event = %q", e)
	}

	// A ConfigMap without the key keeps the good one.
	l.apply(cm("3", map[string]string{"other": "x"}))
	if src.Current() != good || src.Degraded() == nil {
		t.Error("a ConfigMap without the key must keep the last good policy and mark the source degraded")
	}
	if e := event(); !strings.Contains(e, `key "policy.yaml" is missing`) {
		t.Errorf("event = %q", e)
	}

	// Other ConfigMaps are ignored; a tombstone of the policy is understood.
	other := cm("4", nil)
	other.Name = "unrelated"
	l.apply(other)
	if src.Current() != good {
		t.Error("an unrelated ConfigMap changed the policy")
	}
	if asConfigMap(cache.DeletedFinalStateUnknown{Obj: cm("5", nil)}) == nil {
		t.Error("tombstones must be unwrapped")
	}
}
