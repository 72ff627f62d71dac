package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventSink records the auditor's Events (events.k8s.io/v1) straight to
// the API server, in order, from a bounded queue. It is an
// events.EventRecorder that folds repeats into series as client-go's
// broadcaster does (the same type, reason, action and regarding object
// within six minutes: the second makes the first Event a series at once,
// later ones are counted and sent at most once a minute), but remembers a
// series by a hash of its key and its Event's name. client-go's broadcaster,
// which controller-runtime's recorders use, keeps a whole copy of every
// Event it sends for six to twelve minutes; under DaemonSet churn, where
// each new resourceVersion makes a new key, those copies were the largest
// part of dsguard's heap (about 13 MB after 3,000 DaemonSets were created),
// scanned by every garbage collection in the meantime.
type EventSink struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	log        logr.Logger
	queue      chan eventOp
	// retryEvery is the pause before an Event is sent again after an
	// error that may pass (the API server out of reach, a timeout).
	retryEvery time.Duration
	// sweepEvery is how often series counts are sent and series that
	// ended are forgotten.
	sweepEvery time.Duration
	now        func() time.Time
	dropped    atomic.Int64

	seed   maphash.Seed
	mu     sync.Mutex
	series map[seriesKey]*series
}

// seriesKey identifies a series: a hash of what makes two Events one
// series as client-go decides it (type, action, reason, and the regarding
// and related objects' references). With thousands of series after a burst
// of DaemonSets, the references themselves (14 strings a key) kept about
// 430 bytes a series, dense with pointers for the collector to follow, a
// hash 130 (BenchmarkEventSinkSeries). A 64-bit hash under a random seed
// makes two different keys meet about once in 10^11 sinks of 20,000 series.
type seriesKey uint64

func (s *EventSink) keyOf(eventType, action, reason string, regarding, related *corev1.ObjectReference) seriesKey {
	var h maphash.Hash
	h.SetSeed(s.seed)
	field := func(v string) {
		h.WriteString(v)
		h.WriteByte(0) // no name, reason or reference holds a NUL
	}
	field(eventType)
	field(action)
	field(reason)
	for _, r := range []*corev1.ObjectReference{regarding, related} {
		if r == nil {
			r = &corev1.ObjectReference{}
		}
		for _, v := range []string{r.Kind, r.Namespace, r.Name, string(r.UID), r.APIVersion, r.ResourceVersion, r.FieldPath} {
			field(v)
		}
	}
	return seriesKey(h.Sum64())
}

// series is an Event sent and how often it has happened since.
type series struct {
	name, namespace string
	count, sent     int32
	last            time.Time
}

// eventOp is one request to the API server: an Event to create, or a
// series count to patch onto one.
type eventOp struct {
	create *eventsv1.Event
	// patch names the Event whose series becomes count, last seen at last.
	patch *seriesPatch
}

// String names the Event op is about, namespace/name.
func (op eventOp) String() string {
	if op.create != nil {
		return op.create.Namespace + "/" + op.create.Name
	}
	return op.patch.namespace + "/" + op.patch.name
}

type seriesPatch struct {
	key             seriesKey
	name, namespace string
	count           int32
	last            time.Time
}

const (
	// eventQueueSize bounds the Events waiting to be sent, as client-go's
	// broadcaster bounds its queue; past it new Events are dropped.
	eventQueueSize = 1000
	// eventTries is how often one Event is sent before it is given up, as
	// client-go tries.
	eventTries = 12
	// seriesWindow is how long after its last occurrence an Event is still
	// repeated into its series, as client-go's finishTime.
	seriesWindow = 6 * time.Minute
	// maxSeries bounds the series remembered (about 130 bytes each);
	// past it a new Event is sent without one, so its repeats are Events
	// too.
	maxSeries = 20000
)

// NewEventSink returns a sink that records Events as controller: the
// reporting controller, and controller-hostname the reporting instance, as
// controller-runtime's recorders name them. It sends nothing until started
// (it is a manager.Runnable).
func NewEventSink(c client.Client, scheme *runtime.Scheme, controller string, log logr.Logger) *EventSink {
	host, _ := os.Hostname()
	return &EventSink{client: c, scheme: scheme, controller: controller, instance: controller + "-" + host, log: log,
		queue: make(chan eventOp, eventQueueSize), retryEvery: 10 * time.Second, sweepEvery: time.Minute, now: time.Now,
		seed: maphash.MakeSeed(), series: map[seriesKey]*series{}}
}

// Eventf queues an Event about regarding; it never blocks.
func (s *EventSink) Eventf(regarding, related runtime.Object, eventType, reason, action, note string, args ...any) {
	ref, err := reference.GetReference(s.scheme, regarding)
	if err != nil {
		s.log.Error(err, "no reference to the object; its Event is not recorded", "reason", reason)
		return
	}
	if !util.ValidateEventType(eventType) {
		s.log.Error(nil, "unsupported Event type; the Event is not recorded", "type", eventType, "reason", reason)
		return
	}
	now := s.now()
	var rel *corev1.ObjectReference
	if related != nil {
		if r, err := reference.GetReference(s.scheme, related); err == nil {
			rel = r
		}
	}
	key := s.keyOf(eventType, action, reason, ref, rel)
	s.mu.Lock()
	if sr, ok := s.series[key]; ok && now.Sub(sr.last) < seriesWindow {
		sr.count++
		sr.last = now
		var op eventOp
		if sr.count == 2 {
			// As client-go: the first repeat makes the series at once.
			sr.sent = 2
			op.patch = &seriesPatch{key: key, name: sr.name, namespace: sr.namespace, count: 2, last: now}
		}
		s.mu.Unlock()
		if op.patch != nil {
			s.enqueue(op, reason, ref)
		}
		return
	}
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ref.Namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: s.controller,
		ReportingInstance:   s.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             rel,
		Note:                fmt.Sprintf(note, args...),
		Type:                eventType,
	}
	if ev.Namespace == "" {
		ev.Namespace = metav1.NamespaceDefault
	}
	if _, ok := s.series[key]; ok || len(s.series) < maxSeries {
		s.series[key] = &series{name: ev.Name, namespace: ev.Namespace, count: 1, sent: 1, last: now}
	}
	s.mu.Unlock()
	s.enqueue(eventOp{create: ev}, reason, ref)
}

// enqueue queues op, or drops it when the queue is full: the API server
// has not taken Events for a while, and the newest wait less to be useful
// than those queued before them.
func (s *EventSink) enqueue(op eventOp, reason string, ref *corev1.ObjectReference) {
	select {
	case s.queue <- op:
	default:
		if n := s.dropped.Add(1); n == 1 || n%100 == 0 {
			s.log.Error(nil, "Event queue full: dropping Events", "dropped", n, "reason", reason,
				"regarding", ref.Namespace+"/"+ref.Name)
		}
	}
}

// sweep queues the counts of series that grew since they were last sent,
// and forgets the series that ended.
func (s *EventSink) sweep() {
	now := s.now()
	var ops []eventOp
	s.mu.Lock()
	for key, sr := range s.series {
		if sr.count > sr.sent {
			ops = append(ops, eventOp{patch: &seriesPatch{key: key, name: sr.name, namespace: sr.namespace, count: sr.count, last: sr.last}})
			sr.sent = sr.count
		}
		if now.Sub(sr.last) >= seriesWindow {
			delete(s.series, key)
		}
	}
	s.mu.Unlock()
	for _, op := range ops {
		s.enqueue(op, "series", &corev1.ObjectReference{Namespace: op.patch.namespace, Name: op.patch.name})
	}
}

// forgetSeries forgets the series of key if its Event is still name.
func (s *EventSink) forgetSeries(key seriesKey, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sr, ok := s.series[key]; ok && sr.name == name {
		delete(s.series, key)
	}
}

// Start sends the queued Events and series counts until ctx ends.
func (s *EventSink) Start(ctx context.Context) error {
	sweep := time.NewTicker(s.sweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sweep.C:
			s.sweep()
		case op := <-s.queue:
			s.send(ctx, op)
		}
	}
}

// NeedLeaderElection is false: every replica sends the Events it records
// (only the elected auditor records them).
func (s *EventSink) NeedLeaderElection() bool { return false }

// send makes op's request, again after errors that may pass, up to
// eventTries times; a request the API server refuses is given up at once,
// as client-go gives it up.
func (s *EventSink) send(ctx context.Context, op eventOp) {
	tries := 0
	var last error
	backoff := wait.Backoff{Duration: s.retryEvery, Jitter: 0.25, Steps: eventTries}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		tries++
		if last = s.request(ctx, op); last == nil {
			return true, nil
		}
		var status apierrors.APIStatus
		if errors.As(last, &status) && !retryableStatus(last) {
			return false, last
		}
		return false, nil
	})
	if err != nil {
		s.log.Error(errors.Join(last, ctx.Err()), "Event not recorded", "tries", tries, "event", op.String())
	}
}

// request makes op's request once: it creates the Event, or patches the
// series count onto it. An Event that exists already was created by an
// earlier try whose answer was lost; a series whose Event has gone from the
// server (Events expire after an hour) is forgotten, so that the next
// occurrence is an Event again.
func (s *EventSink) request(ctx context.Context, op eventOp) error {
	if op.create != nil {
		if err := s.client.Create(ctx, op.create.DeepCopy()); !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	p := op.patch
	body, err := json.Marshal(map[string]eventsv1.EventSeries{"series": {Count: p.count, LastObservedTime: metav1.NewMicroTime(p.last)}})
	if err != nil {
		return err
	}
	err = s.client.Patch(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace}},
		client.RawPatch(types.MergePatchType, body))
	if apierrors.IsNotFound(err) {
		s.forgetSeries(p.key, p.name)
		return nil
	}
	return err
}

// retryableStatus reports whether an answer of the API server says to try
// again later rather than that the Event is wrong.
func retryableStatus(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}
