package clusterview

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/policy"
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
	// Client records the last good policy in the ConfigMap's annotation
	// LastGoodPolicyAnnotation; nil records nothing.
	Client client.Client

	// loaded is the document of the active policy, so that an update of
	// the ConfigMap that leaves it as it is (the annotation dsguard writes)
	// does not load it again.
	loaded string
}

// LastGoodPolicyAnnotation holds, on the policy ConfigMap, the last policy
// document a replica loaded successfully. A replica that starts while the
// ConfigMap's policy is invalid serves it instead of the built-in defaults.
const LastGoodPolicyAnnotation = "dsguard.io/last-good-policy"

// maxRecordedPolicy bounds the record: annotations share 256 KiB.
const maxRecordedPolicy = 128 << 10

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (l *PolicyLoader) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (l *PolicyLoader) Start(ctx context.Context) error {
	inf, err := l.Cache.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return fmt.Errorf("policy ConfigMap informer: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.apply(obj) },
		UpdateFunc: func(_, obj any) { l.apply(obj) },
		DeleteFunc: func(obj any) {
			if cm := asConfigMap(obj); cm != nil && l.matches(cm) {
				l.deleted(cm)
			}
		},
	})
	if err != nil {
		return err
	}
	if !l.Cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	// A synced cache has listed the ConfigMap; its handler may not have
	// been handed it yet. Only once the handler has seen the initial list
	// does "no policy yet" mean "no ConfigMap": deciding earlier served the
	// built-in defaults for a moment while a stricter policy existed.
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
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
	if ok && data == l.loaded && l.Source.Degraded() == nil {
		return // only the metadata changed, e.g. the record below
	}
	var p *policy.Policy
	var err error
	if !ok {
		err = fmt.Errorf("key %q is missing", l.Ref.Key)
	} else {
		p, err = l.Source.Parse([]byte(data))
	}
	if err != nil {
		if rec, has := cm.Annotations[LastGoodPolicyAnnotation]; has && l.Source.Current() == nil {
			// Starting on a broken policy: serve the last good one a
			// replica recorded, and stay Degraded.
			if lerr := l.Source.LoadLastGood([]byte(rec), "the last good policy recorded on "+l.Ref.String(), err); lerr == nil {
				l.loaded = rec
			}
		}
		l.Source.Reject(err, origin)
		active := l.Source.Current()
		l.Log.Error(err, "invalid policy: keeping the previous policy", "configMap", l.Ref.NamespacedName(),
			"activePolicy", active.Origin, "generation", active.Generation)
		if l.Recorder != nil {
			l.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, "InvalidPolicy", "LoadPolicy",
				"policy rejected, still enforcing %s: %v", active.Origin, err)
		}
		return
	}
	l.Source.Activate(p, origin)
	active := l.Source.Current()
	l.loaded = data
	l.Log.Info("policy loaded", "configMap", l.Ref.NamespacedName(), "generation", active.Generation,
		"resourceVersion", cm.ResourceVersion)
	if l.Recorder != nil {
		l.Recorder.Eventf(cm, nil, corev1.EventTypeNormal, "PolicyLoaded", "LoadPolicy",
			"policy generation %d is active", active.Generation)
	}
	if ws := active.Policy.Weaknesses(); len(ws) > 0 {
		details := make([]string, len(ws))
		for i, w := range ws {
			details[i] = w.Detail
		}
		l.Log.Info("the policy is weaker than dsguard's baseline", "weaknesses", details)
		if l.Recorder != nil {
			l.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, "WeakPolicy", "LoadPolicy",
				"policy generation %d is weaker than dsguard's baseline: %s", active.Generation, strings.Join(details, "; "))
		}
	}
	l.record(cm, data)
}

// record writes data to the ConfigMap's last-good annotation, unless it is
// there already.
func (l *PolicyLoader) record(cm *corev1.ConfigMap, data string) {
	if l.Client == nil || cm.Annotations[LastGoodPolicyAnnotation] == data || len(data) > maxRecordedPolicy {
		return
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations":     map[string]string{LastGoodPolicyAnnotation: data},
		"resourceVersion": cm.ResourceVersion, // only onto what was loaded
	}})
	if err != nil {
		return
	}
	// The informer's context is gone by the time a handler runs; a patch is
	// short.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
	if err := l.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsConflict(err) {
		l.Log.Error(err, "recording the last good policy on the ConfigMap", "configMap", l.Ref.NamespacedName())
	}
}

// deleted keeps the active policy in force when its ConfigMap is deleted:
// a deletion must not quietly switch to the (weaker) built-in defaults. The
// source reports Degraded until a ConfigMap exists again.
func (l *PolicyLoader) deleted(cm *corev1.ConfigMap) {
	err := fmt.Errorf("%s was deleted", l.Ref)
	l.Source.KeepDegraded(err)
	active := l.Source.Current()
	l.Log.Info("policy ConfigMap deleted: still enforcing the last good policy; create it again to change the policy",
		"configMap", l.Ref.NamespacedName(), "activePolicy", active.Origin, "generation", active.Generation)
	if l.Recorder != nil {
		l.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, "PolicyDeleted", "LoadPolicy",
			"policy ConfigMap deleted: still enforcing %s (generation %d)", active.Origin, active.Generation)
	}
	l.loaded = ""
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
