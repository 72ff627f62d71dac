package audit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
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
// regarding object's namespace, and nothing for an Event of an unsupported
// type. The sink sends its queue in order, so once the Event recorded after
// the unsupported one is there, that one would be too.
func TestEventSink_RecordsEvents(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	s := NewEventSink(c, clientgoscheme.Scheme, "dsguard", logr.Discard())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	s.Eventf(sinkDS(), nil, "Warning", "CoverageReduced", "Audit", "%d nodes newly skipped", 3)
	s.Eventf(sinkDS(), nil, "Normal", "CoverageRestored", "Audit", "%s", "every node covered")
	s.Eventf(sinkDS(), nil, "Bogus", "Ignored", "Audit", "unsupported type")
	s.Eventf(sinkDS(), nil, "Normal", "Last", "Audit", "after the unsupported one")

	var list eventsv1.EventList
	deadline := time.Now().Add(10 * time.Second)
	last := func() bool {
		return slices.ContainsFunc(list.Items, func(ev eventsv1.Event) bool { return ev.Reason == "Last" })
	}
	for !last() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if err := c.List(t.Context(), &list, client.InNamespace("monitoring")); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !last() {
		t.Fatalf("the last Event was not recorded within 10s: %+v", list.Items)
	}
	if len(list.Items) != 3 {
		t.Fatalf("%d Events recorded, want 3 (none of type Bogus): %+v", len(list.Items), list.Items)
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
	for i := range eventQueueSize + 3 {
		ds := sinkDS()
		ds.Name = fmt.Sprintf("agent-%d", i)
		s.Eventf(ds, nil, "Normal", "Audited", "Audit", "note")
	}
	if len(s.queue) != eventQueueSize || s.dropped.Load() != 3 {
		t.Errorf("queued %d, dropped %d; want %d and 3", len(s.queue), s.dropped.Load(), eventQueueSize)
	}
}

// TestEventSink_Series checks that repeats fold into a series as client-go's
// broadcaster folds them: the first repeat at once, later ones with the next
// sweep, a new Event once the series has ended, and other objects, reasons
// or resourceVersions apart.
func TestEventSink_Series(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	s := NewEventSink(c, clientgoscheme.Scheme, "dsguard", logr.Discard())
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	// drain sends what is queued and returns the Events stored.
	drain := func() map[string]eventsv1.Event {
		t.Helper()
		for len(s.queue) > 0 {
			s.send(t.Context(), <-s.queue)
		}
		var list eventsv1.EventList
		if err := c.List(t.Context(), &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]eventsv1.Event{}
		for _, ev := range list.Items {
			out[ev.Name] = ev
		}
		return out
	}
	count := func(ev eventsv1.Event) int32 {
		if ev.Series == nil {
			return 1
		}
		return ev.Series.Count
	}
	reduced := func() { s.Eventf(sinkDS(), nil, "Warning", "CoverageReduced", "Audit", "gap") }

	reduced()
	evs := drain()
	if len(evs) != 1 {
		t.Fatalf("%d Events after the first, want 1", len(evs))
	}
	var first string
	for name := range evs {
		first = name
	}
	now = now.Add(time.Second)
	reduced()
	if evs = drain(); len(evs) != 1 || count(evs[first]) != 2 || !evs[first].Series.LastObservedTime.Time.Equal(now) {
		t.Fatalf("after a repeat: %+v, want the first Event with a series of 2 seen now", evs)
	}
	now = now.Add(time.Second)
	reduced()
	reduced()
	if evs = drain(); count(evs[first]) != 2 {
		t.Fatalf("later repeats sent before the sweep: count %d", count(evs[first]))
	}
	s.sweep()
	if evs = drain(); len(evs) != 1 || count(evs[first]) != 4 {
		t.Fatalf("after the sweep: %+v, want one Event with a series of 4", evs)
	}
	s.sweep()
	if len(s.queue) != 0 {
		t.Errorf("a sweep with no new repeats queued %d requests", len(s.queue))
	}

	// Apart: another reason, another resourceVersion of the object.
	// (Events are named after their object and the time, as client-go
	// names them: the clock moves between two.)
	now = now.Add(time.Millisecond)
	s.Eventf(sinkDS(), nil, "Normal", "CoverageRestored", "Audit", "back")
	now = now.Add(time.Millisecond)
	newer := sinkDS()
	newer.ResourceVersion = "8"
	s.Eventf(newer, nil, "Warning", "CoverageReduced", "Audit", "gap")
	if evs = drain(); len(evs) != 3 {
		t.Fatalf("%d Events, want 3: another reason and another resourceVersion are Events of their own", len(evs))
	}

	// The series ends seriesWindow after its last repeat; the next
	// occurrence is a new Event.
	now = now.Add(seriesWindow)
	s.sweep()
	s.mu.Lock()
	remembered := len(s.series)
	s.mu.Unlock()
	if remembered != 0 {
		t.Errorf("%d series remembered after they ended, want 0", remembered)
	}
	reduced()
	if evs = drain(); len(evs) != 4 {
		t.Fatalf("%d Events, want 4: a repeat after the series ended is a new Event", len(evs))
	}

	// An Event gone from the server (expired) takes its series with it:
	// the next repeat is an Event again.
	for name, ev := range evs {
		if ev.Reason == "CoverageReduced" && ev.Regarding.ResourceVersion == "7" && name != first {
			if err := c.Delete(t.Context(), &ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	now = now.Add(time.Second)
	reduced() // the first repeat: its patch finds no Event
	if evs = drain(); len(evs) != 3 {
		t.Fatalf("%d Events, want 3 after one was deleted", len(evs))
	}
	now = now.Add(time.Second)
	reduced()
	if evs = drain(); len(evs) != 4 {
		t.Fatalf("%d Events, want 4: a repeat after its Event was gone is a new Event", len(evs))
	}
}
