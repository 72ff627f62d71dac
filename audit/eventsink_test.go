package audit

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func sinkDS() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "monitoring", UID: "u-1", ResourceVersion: "7"}}
}

// TestEventSink_RecordsEvents runs the sink against a client and reads back
// what it created: the fields controller-runtime's recorders set, in the
// regarding object's namespace.
func TestEventSink_RecordsEvents(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	s := NewEventSink(c, clientgoscheme.Scheme, "dsguard", logr.Discard())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	s.Eventf(sinkDS(), nil, "Warning", "CoverageReduced", "Audit", "%d nodes newly skipped", 3)
	s.Eventf(sinkDS(), nil, "Normal", "CoverageRestored", "Audit", "%s", "every node covered")
	s.Eventf(sinkDS(), nil, "Bogus", "Ignored", "Audit", "unsupported type")

	var list eventsv1.EventList
	deadline := time.Now().Add(10 * time.Second)
	for len(list.Items) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if err := c.List(t.Context(), &list, client.InNamespace("monitoring")); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("%d Events recorded, want 2: %+v", len(list.Items), list.Items)
	}
	reasons := map[string]eventsv1.Event{}
	for _, ev := range list.Items {
		reasons[ev.Reason] = ev
	}
	ev, ok := reasons["CoverageReduced"]
	if !ok {
		t.Fatalf("no CoverageReduced Event in %+v", list.Items)
	}
	if ev.Type != "Warning" || ev.Note != "3 nodes newly skipped" || ev.Action != "Audit" || ev.ReportingController != "dsguard" ||
		len(ev.ReportingInstance) <= len("dsguard-") || ev.ReportingInstance[:len("dsguard-")] != "dsguard-" {
		t.Errorf("Event %+v: want type Warning, the note formatted, action Audit, reported by dsguard from dsguard-<host>", ev)
	}
	r := ev.Regarding
	if r.Kind != "DaemonSet" || r.APIVersion != "apps/v1" || r.Name != "agent" || r.Namespace != "monitoring" || r.UID != "u-1" ||
		r.ResourceVersion != "7" {
		t.Errorf("regarding %+v, want the DaemonSet at its resourceVersion", r)
	}
	if ev.EventTime.IsZero() || ev.Series != nil {
		t.Errorf("Event %+v: want an event time and no series", ev)
	}
	if _, ok := reasons["CoverageRestored"]; !ok {
		t.Errorf("no CoverageRestored Event in %+v", list.Items)
	}
}

// TestEventSink_Retries checks which errors send an Event again: those that
// may pass, up to the limit, and not an Event the API server refuses.
func TestEventSink_Retries(t *testing.T) {
	gr := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	for _, c := range []struct {
		name      string
		failFirst int // creates that fail before one succeeds
		err       error
		wantTries int32
		wantSaved bool
	}{
		{"the API server out of reach, then back", 2, errors.New("connection refused"), 3, true},
		{"throttled, then taken", 1, apierrors.NewTooManyRequests("slow down", 1), 2, true},
		{"unavailable for good", eventTries + 5, apierrors.NewServiceUnavailable("down"), eventTries, false},
		{"refused as invalid", 1, apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "x", nil), 1, false},
		{"forbidden", 1, apierrors.NewForbidden(gr, "x", errors.New("no RBAC")), 1, false},
		{"created by a try whose answer was lost", 1, apierrors.NewAlreadyExists(gr, "x"), 1, false},
		{"internal error, then taken", 1, apierrors.NewGenericServerResponse(http.StatusInternalServerError, "create", gr, "x", "boom", 0, true), 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tries atomic.Int32
			cl := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if tries.Add(1) <= int32(c.failFirst) {
						return c.err
					}
					return cl.Create(ctx, obj, opts...)
				},
			}).Build()
			s := NewEventSink(cl, clientgoscheme.Scheme, "dsguard", logr.Discard())
			s.retryEvery = time.Millisecond
			s.Eventf(sinkDS(), nil, "Warning", "CoverageReduced", "Audit", "gap")
			s.send(t.Context(), <-s.queue)
			if got := tries.Load(); got != c.wantTries {
				t.Errorf("%d tries, want %d", got, c.wantTries)
			}
			var list eventsv1.EventList
			if err := cl.List(t.Context(), &list); err != nil {
				t.Fatal(err)
			}
			if saved := len(list.Items) == 1; saved != c.wantSaved {
				t.Errorf("Event saved: %v, want %v", saved, c.wantSaved)
			}
		})
	}
}

// TestEventSink_FullQueueDrops checks that recording never blocks: past the
// queue's size new Events are dropped and counted.
func TestEventSink_FullQueueDrops(t *testing.T) {
	s := NewEventSink(fake.NewClientBuilder().Build(), clientgoscheme.Scheme, "dsguard", logr.Discard())
	for range eventQueueSize + 3 {
		s.Eventf(sinkDS(), nil, "Normal", "Audited", "Audit", "note")
	}
	if len(s.queue) != eventQueueSize || s.dropped.Load() != 3 {
		t.Errorf("queued %d, dropped %d; want %d and 3", len(s.queue), s.dropped.Load(), eventQueueSize)
	}
}
