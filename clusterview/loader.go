package clusterview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"

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
	// LastGood records every policy loaded successfully and is served by
	// a replica that starts while the ConfigMap is missing or invalid; nil
	// records nothing (a start without a valid ConfigMap then serves the
	// built-in defaults, Degraded).
	LastGood *LastGoodStore

	// loaded is the document of the active policy, so that an update of
	// the ConfigMap that leaves it as it is (labels, annotations) does not
	// load it again.
	loaded string
	// loadedConfig is the document of the last policy this loader loaded
	// (not a fallback), to tell whether the next one lowers enforcement.
	loadedConfig *policy.Config
}

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
		l.fallBack(ctx, fmt.Errorf("%s does not exist", l.Ref), nil)
	}
	<-ctx.Done()
	return nil
}

// fallBack makes a policy active when there is none and the ConfigMap's
// cannot be used (cause): the last good policy when its record is intact
// and valid, otherwise the built-in defaults. Either way the source stays
// Degraded by cause, which every response then carries as a warning: a
// replica never serves the defaults silently. regarding, when set, is the
// broken ConfigMap the Event is about.
func (l *PolicyLoader) fallBack(ctx context.Context, cause error, regarding *corev1.ConfigMap) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	why := "no last good policy is recorded"
	if l.LastGood != nil {
		doc, rec, err := l.LastGood.Load(ctx)
		if err == nil {
			err = l.Source.LoadLastGood(doc, "the last good policy in "+l.LastGood.String(), cause)
		}
		if err == nil {
			l.loaded = string(doc)
			active := l.Source.Current()
			l.Log.Error(cause, "no usable policy ConfigMap: enforcing the last good policy", "configMap", l.Ref.NamespacedName(),
				"activePolicy", active.Origin, "generation", active.Generation)
			l.event(firstObject(regarding, rec), "LastGoodPolicy",
				"%v: enforcing %s (generation %d); create or fix the ConfigMap to change the policy", cause, active.Origin, active.Generation)
			return
		}
		if !errors.Is(err, ErrNoLastGood) {
			why = "the last good policy cannot be used: " + err.Error()
			l.Log.Error(err, "ignoring the last good policy record", "record", l.LastGood.String())
		}
		if regarding == nil {
			regarding = rec
		}
	}
	l.Source.UseDefaultsDegraded(fmt.Errorf("%w, and %s: enforcing the built-in defaults", cause, why), "built-in defaults ("+why+")")
	l.Log.Error(cause, "no usable policy ConfigMap and no last good policy: enforcing the built-in defaults",
		"configMap", l.Ref.NamespacedName(), "reason", why)
	l.event(regarding, "DefaultPolicy", "%v, and %s: enforcing the built-in defaults", cause, why)
}

// event records a Warning about obj, when there is an object to attach it
// to and a recorder.
func (l *PolicyLoader) event(obj *corev1.ConfigMap, reason, format string, args ...any) {
	if l.Recorder == nil || obj == nil {
		return
	}
	l.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "LoadPolicy", format, args...)
}

func firstObject(cms ...*corev1.ConfigMap) *corev1.ConfigMap {
	for _, cm := range cms {
		if cm != nil {
			return cm
		}
	}
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
		return // only the metadata changed
	}
	var p *policy.Policy
	var err error
	if !ok {
		err = fmt.Errorf("key %q is missing", l.Ref.Key)
	} else {
		p, err = l.Source.Parse([]byte(data))
	}
	if err != nil {
		if l.Source.Current() == nil {
			// Starting on a broken policy: serve the last good one, and
			// stay Degraded.
			l.fallBack(context.Background(), fmt.Errorf("%s is invalid: %w", l.Ref, err), cm)
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
	l.Source.Activate(p, []byte(data), origin)
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
	l.weakenings(cm, active.Generation, p.Config())
	l.record([]byte(data))
}

// weakenings says each way cfg lowers enforcement against the policy this
// loader loaded before: the webhook warned whoever applied it, this tells
// those who watch the Events and metrics, also of a change the webhook
// never saw (it was failing open, or the write went around it).
func (l *PolicyLoader) weakenings(cm *corev1.ConfigMap, generation int64, cfg *policy.Config) {
	prev := l.loadedConfig
	l.loadedConfig = cfg
	ws := policy.Weakenings(prev, cfg)
	if len(ws) == 0 {
		return
	}
	l.Source.CountWeakenings(ws)
	details := make([]string, len(ws))
	for i, w := range ws {
		details[i] = w.Detail
	}
	l.Log.Info("the policy change lowers enforcement", "generation", generation, "weakenings", details)
	if l.Recorder != nil {
		l.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, "PolicyWeakened", "LoadPolicy",
			"policy generation %d lowers enforcement against the one before: %s", generation, strings.Join(details, "; "))
	}
}

// record keeps data as the last good policy.
func (l *PolicyLoader) record(data []byte) {
	if l.LastGood == nil {
		return
	}
	// The informer's context is gone by the time a handler runs; a write
	// is short.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.LastGood.Save(ctx, data); err != nil {
		l.Log.Error(err, "recording the last good policy", "configMap", l.Ref.NamespacedName())
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
