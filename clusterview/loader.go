package clusterview

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// PolicyLoader keeps a PolicySource in step with the policy ConfigMap. It
// runs on every replica (not only the leader): each one serves requests.
// The cache it reads must be restricted to the one ConfigMap (see
// PolicyCacheOptions), so dsguard neither needs nor holds other ConfigMaps.
type PolicyLoader struct {
	Ref      PolicyRef
	Cache    cache.Cache
	Source   *PolicySource
	Recorder events.EventRecorder
	Log      logr.Logger
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (l *PolicyLoader) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (l *PolicyLoader) Start(ctx context.Context) error {
	inf, err := l.Cache.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return fmt.Errorf("policy ConfigMap informer: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.apply(obj) },
		UpdateFunc: func(_, obj any) { l.apply(obj) },
		DeleteFunc: func(obj any) {
			if cm := asConfigMap(obj); cm != nil && l.matches(cm) {
				l.Log.Info("policy ConfigMap deleted: enforcing the built-in defaults", "configMap", l.Ref.NamespacedName())
				l.Source.UseDefaults(l.Ref.String() + " was deleted")
			}
		},
	})
	if err != nil {
		return err
	}
	if !l.Cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	if l.Source.Current() == nil {
		l.Log.Info("no policy ConfigMap: enforcing the built-in defaults", "configMap", l.Ref.NamespacedName())
		l.Source.UseDefaults("no " + l.Ref.String())
	}
	<-ctx.Done()
	return nil
}

func (l *PolicyLoader) matches(cm *corev1.ConfigMap) bool {
	return cm.Namespace == l.Ref.Namespace && cm.Name == l.Ref.Name
}

func (l *PolicyLoader) apply(obj any) {
	cm := asConfigMap(obj)
	if cm == nil || !l.matches(cm) {
		return
	}
	origin := fmt.Sprintf("%s (resourceVersion %s)", l.Ref, cm.ResourceVersion)
	data, ok := cm.Data[l.Ref.Key]
	var err error
	if !ok {
		err = fmt.Errorf("key %q is missing", l.Ref.Key)
		l.Source.Reject(err, origin)
	} else {
		err = l.Source.Load([]byte(data), origin)
	}
	active := l.Source.Current()
	if err != nil {
		l.Log.Error(err, "invalid policy: keeping the previous policy", "configMap", l.Ref.NamespacedName(),
			"activePolicy", active.Origin, "generation", active.Generation)
		if l.Recorder != nil {
			l.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, "InvalidPolicy", "LoadPolicy",
				"policy rejected, still enforcing %s: %v", active.Origin, err)
		}
		return
	}
	l.Log.Info("policy loaded", "configMap", l.Ref.NamespacedName(), "generation", active.Generation,
		"resourceVersion", cm.ResourceVersion)
	if l.Recorder != nil {
		l.Recorder.Eventf(cm, nil, corev1.EventTypeNormal, "PolicyLoaded", "LoadPolicy",
			"policy generation %d is active", active.Generation)
	}
}

func asConfigMap(obj any) *corev1.ConfigMap {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return o
	case toolscache.DeletedFinalStateUnknown:
		cm, _ := o.Obj.(*corev1.ConfigMap)
		return cm
	}
	return nil
}
