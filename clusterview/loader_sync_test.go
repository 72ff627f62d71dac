package clusterview

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// slowCache is a cache whose informer has listed (WaitForCacheSync is true)
// before its event handler has been handed the listed ConfigMap: the handler
// is slow. The ConfigMap is delivered once the loader has either decided on
// its own (it made a policy active) or asked whether its handler has synced.
type slowCache struct {
	cache.Cache // only the methods below are used
	informer    *slowInformer
}

func (c *slowCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return c.informer, nil
}

func (c *slowCache) WaitForCacheSync(context.Context) bool { return true }

type slowInformer struct {
	cache.Informer // only AddEventHandler is used
	handler        toolscache.ResourceEventHandler
	delivered      atomic.Bool
	asked          atomic.Bool
}

func (i *slowInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.handler = h
	return registration{i: i}, nil
}

type registration struct {
	toolscache.ResourceEventHandlerRegistration // only HasSynced is used
	i                                           *slowInformer
}

func (r registration) HasSynced() bool {
	r.i.asked.Store(true)
	return r.i.delivered.Load()
}

// TestPolicyLoader_WaitsForItsHandler reproduces the start-up race: the
// cache reports synced while the ConfigMap has not reached the loader's
// handler yet. The loader must not decide "no ConfigMap" and serve the
// built-in defaults in that moment; the first policy it makes active is the
// ConfigMap's.
func TestPolicyLoader_WaitsForItsHandler(t *testing.T) {
	ref := PolicyRef{Namespace: "dsguard-system", Name: "dsguard-policy", Key: "policy.yaml"}
	src := NewPolicySource(NewPolicyMetrics(prometheus.NewRegistry()))
	inf := &slowInformer{}
	l := &PolicyLoader{Ref: ref, Cache: &slowCache{informer: inf}, Source: src, Log: logr.Discard()}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = l.Start(ctx) }()

	for src.Current() == nil && !inf.asked.Load() {
		select {
		case <-ctx.Done():
			t.Fatal("the loader neither decided nor asked its handler")
		default:
		}
		runtime.Gosched()
	}
	inf.handler.OnAdd(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, ResourceVersion: "7"},
		Data:       map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: warn\n"},
	}, true)
	inf.delivered.Store(true)
	for src.ReadyCheck(nil) != nil {
		runtime.Gosched()
	}

	first := src.Current()
	if first.Generation != 1 || !strings.Contains(first.Origin, "resourceVersion 7") {
		t.Errorf("first active policy: generation %d from %q; want generation 1 from the ConfigMap, never the built-in defaults first",
			first.Generation, first.Origin)
	}
}
