package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventSink records the auditor's Events (events.k8s.io/v1) straight to
// the API server, in order, from a bounded queue. It is an
// events.EventRecorder without a series cache: client-go's broadcaster,
// which controller-runtime's recorders use, keeps a copy of every Event it
// sends for six to twelve minutes, so that a repeat within that time
// becomes a series on the first Event. The auditor reports changes, so its
// Events are not repeats (each names a DaemonSet at its resourceVersion),
// and under DaemonSet churn those copies were the largest part of dsguard's
// heap: about 13 MB after 3,000 DaemonSets were created, kept for minutes
// and scanned by every garbage collection in the meantime.
type EventSink struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	log        logr.Logger
	queue      chan *eventsv1.Event
	// retryEvery is the pause before an Event is sent again after an
	// error that may pass (the API server out of reach, a timeout).
	retryEvery time.Duration
	dropped    atomic.Int64
}

const (
	// eventQueueSize bounds the Events waiting to be sent, as client-go's
	// broadcaster bounds its queue; past it new Events are dropped.
	eventQueueSize = 1000
	// eventTries is how often one Event is sent before it is given up, as
	// client-go tries.
	eventTries = 12
)

// NewEventSink returns a sink that records Events as controller: the
// reporting controller, and controller-hostname the reporting instance, as
// controller-runtime's recorders name them. It sends nothing until started
// (it is a manager.Runnable).
func NewEventSink(c client.Client, scheme *runtime.Scheme, controller string, log logr.Logger) *EventSink {
	host, _ := os.Hostname()
	return &EventSink{client: c, scheme: scheme, controller: controller, instance: controller + "-" + host, log: log,
		queue: make(chan *eventsv1.Event, eventQueueSize), retryEvery: 10 * time.Second}
}

// Eventf queues an Event about regarding; it never blocks.
func (s *EventSink) Eventf(regarding, related runtime.Object, eventType, reason, action, note string, args ...any) {
	ref, err := reference.GetReference(s.scheme, regarding)
	if err != nil {
		s.log.Error(err, "no reference to the object; its Event is not recorded", "reason", reason)
		return
	}
	if eventType != "Normal" && eventType != "Warning" {
		s.log.Error(nil, "unsupported Event type; the Event is not recorded", "type", eventType, "reason", reason)
		return
	}
	now := time.Now()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ref.Namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: s.controller,
		ReportingInstance:   s.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Note:                fmt.Sprintf(note, args...),
		Type:                eventType,
	}
	if ev.Namespace == "" {
		ev.Namespace = metav1.NamespaceDefault
	}
	if related != nil {
		if rel, err := reference.GetReference(s.scheme, related); err == nil {
			ev.Related = rel
		}
	}
	select {
	case s.queue <- ev:
	default:
		// The API server has not taken Events for a while: the newest
		// wait less to be useful than those queued before them.
		if n := s.dropped.Add(1); n == 1 || n%100 == 0 {
			s.log.Error(nil, "Event queue full: dropping Events", "dropped", n, "reason", reason,
				"regarding", ref.Namespace+"/"+ref.Name)
		}
	}
}

// Start sends the queued Events until ctx ends.
func (s *EventSink) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-s.queue:
			s.send(ctx, ev)
		}
	}
}

// NeedLeaderElection is false: every replica sends the Events it records
// (only the elected auditor records them).
func (s *EventSink) NeedLeaderElection() bool { return false }

// send creates ev, again after errors that may pass, up to eventTries
// times; an Event the API server refuses is given up at once, as client-go
// gives it up.
func (s *EventSink) send(ctx context.Context, ev *eventsv1.Event) {
	for try := 1; ; try++ {
		err := s.client.Create(ctx, ev.DeepCopy())
		if err == nil || apierrors.IsAlreadyExists(err) {
			return
		}
		var status apierrors.APIStatus
		refused := errors.As(err, &status) && !retryableStatus(err)
		if refused || try >= eventTries || ctx.Err() != nil {
			s.log.Error(err, "Event not recorded", "tries", try, "reason", ev.Reason,
				"regarding", ev.Regarding.Namespace+"/"+ev.Regarding.Name)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.Jitter(s.retryEvery, 0.25)):
		}
	}
}

// retryableStatus reports whether an answer of the API server says to try
// again later rather than that the Event is wrong.
func retryableStatus(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}
