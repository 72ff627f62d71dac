package audit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// memoryLock is a resourcelock.Interface kept in memory, as a Lease would be.
type memoryLock struct {
	mu       sync.Mutex
	record   *resourcelock.LeaderElectionRecord
	identity string
	// released is closed the first time the record is written without a
	// holder (client-go's release).
	released     chan struct{}
	releasedOnce sync.Once
}

func (l *memoryLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.record == nil {
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, "test")
	}
	r := *l.record
	return &r, []byte(r.HolderIdentity + r.RenewTime.String()), nil
}

func (l *memoryLock) Create(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.Update(context.Background(), ler)
}

func (l *memoryLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.record = &ler
	if ler.HolderIdentity == "" {
		l.releasedOnce.Do(func() { close(l.released) })
	}
	return nil
}

func (l *memoryLock) RecordEvent(string) {}
func (l *memoryLock) Identity() string   { return l.identity }
func (l *memoryLock) Describe() string   { return "test/lease" }

func (l *memoryLock) holder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.record == nil {
		return ""
	}
	return l.record.HolderIdentity
}

// countingRunnable returns err from Start, or blocks until its context ends
// when err is nil.
type countingRunnable struct {
	err    error
	starts chan struct{}
}

func (r *countingRunnable) Start(ctx context.Context) error {
	r.starts <- struct{}{}
	if r.err != nil {
		return r.err
	}
	<-ctx.Done()
	return nil
}

var _ manager.Runnable = &countingRunnable{}

func TestElected_ReleasesTheLeaseWhenTheRunnableStops(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantRelease bool
	}{
		// An auditor that stops with an error must not keep the lease:
		// while it is held, no other replica audits.
		{"the runnable fails", errors.New("informer gone"), true},
		// A running auditor keeps it.
		{"the runnable runs", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lock := &memoryLock{identity: "replica-1", released: make(chan struct{})}
			run := &countingRunnable{err: tt.err, starts: make(chan struct{}, 10)}
			e := &Elected{Runnable: run, Lock: lock, Log: logr.Discard(),
				LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- e.Start(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Start: %v", err)
				}
			}()
			select {
			case <-run.starts:
			case <-time.After(10 * time.Second):
				t.Fatal("the runnable never started")
			}
			select {
			case <-lock.released:
				if !tt.wantRelease {
					t.Fatalf("lease released while the runnable runs")
				}
			case <-time.After(time.Second):
				if tt.wantRelease {
					t.Fatalf("the runnable stopped with an error, but the lease is still held by %q", lock.holder())
				}
				if lock.holder() != "replica-1" {
					t.Fatalf("holder %q, want replica-1", lock.holder())
				}
				return
			}
			// Released: this replica waits a lease duration before it
			// campaigns again, so another one can take over.
			select {
			case <-run.starts:
				t.Fatal("started again at once: the other replicas had no chance to take the lease")
			case <-time.After(1500 * time.Millisecond):
			}
		})
	}
}
