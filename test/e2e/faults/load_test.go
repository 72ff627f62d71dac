package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// warningCollector hands each warning to the collector in the request's context.
type warningCollector struct{}

type warningsKey struct{}

type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (warningCollector) HandleWarningHeaderWithContext(ctx context.Context, _ int, _ string, text string) {
	if w, ok := ctx.Value(warningsKey{}).(*warnings); ok {
		w.mu.Lock()
		w.lines = append(w.lines, text)
		w.mu.Unlock()
	}
}

// withWarnings returns a context whose requests collect their warnings.
func withWarnings(ctx context.Context) (context.Context, *warnings) {
	w := &warnings{}
	return context.WithValue(ctx, warningsKey{}, w), w
}

// verdict is dsguard's answer to one request as the API server's client saw it.
type verdict struct {
	denied   bool
	message  string   // the deny message
	warnings []string // warning lines when allowed
}

// review sends ds as a server-side dry-run create through the API server and
// returns dsguard's verdict; an error means no verdict came back (the request
// failed: a webhook call failure, a timeout, the API server down).
func review(ctx context.Context, ds *appsv1.DaemonSet) (verdict, error) {
	ctx, w := withWarnings(ctx)
	_, err := kube.AppsV1().DaemonSets(ds.Namespace).Create(ctx, ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		w.mu.Lock()
		defer w.mu.Unlock()
		return verdict{warnings: w.lines}, nil
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "dsguard coverage rule"):
		return verdict{denied: true, message: err.Error()}, nil
	}
	return verdict{}, err
}

// example reads a DaemonSet from examples/ and puts it into namespace.
func example(t *testing.T, name, namespace string) *appsv1.DaemonSet {
	t.Helper()
	ds := framework.ExampleDaemonSet(t, cluster.Root, name)
	ds.Namespace = namespace
	framework.OwnHostPort(ds)
	return ds
}

// load sends requests from several workers until stopped and counts them.
type load struct {
	name            string
	sent, failed    atomic.Int64
	mu              sync.Mutex
	lastErr         error
	firstFailure    time.Time
	cancel          context.CancelFunc
	wg              sync.WaitGroup
	excusedFailures atomic.Int64 // failures while excuse() held (the API server was down on purpose)
}

// startLoad runs send from workers goroutines, each pausing pause between
// requests. A failure while excuse returns true (nil: never) is counted
// apart: it happened while the test had taken the API server down itself.
func startLoad(ctx context.Context, name string, workers int, pause time.Duration, excuse func() bool, send func(ctx context.Context) error) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{name: name, cancel: cancel}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				err := send(ctx)
				if ctx.Err() != nil {
					return // cut short by stop: not the system's doing
				}
				l.sent.Add(1)
				if err != nil {
					if excuse != nil && excuse() {
						l.excusedFailures.Add(1)
					} else {
						l.failed.Add(1)
						l.mu.Lock()
						l.lastErr = err
						if l.firstFailure.IsZero() {
							l.firstFailure = time.Now()
						}
						l.mu.Unlock()
					}
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		}()
	}
	return l
}

// stop ends the load, prints its figures and fails t if a request failed.
func (l *load) stop(t *testing.T) {
	t.Helper()
	l.cancel()
	l.wg.Wait()
	msg := fmt.Sprintf("%s: %d requests sent, %d failed", l.name, l.sent.Load(), l.failed.Load())
	if n := l.excusedFailures.Load(); n > 0 {
		msg += fmt.Sprintf(" (and %d refused while the API server itself was down)", n)
	}
	t.Log("figures: " + msg)
	if l.failed.Load() > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Errorf("%s: %d requests failed, the first at %s; last error: %v", l.name, l.failed.Load(),
			l.firstFailure.Format(time.TimeOnly), l.lastErr)
	}
	if l.sent.Load() == 0 {
		t.Errorf("%s: no request was sent", l.name)
	}
}

// deniedByDsguard is a request that must come back denied by dsguard.
func deniedByDsguard(ds *appsv1.DaemonSet) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		v, err := review(ctx, ds)
		if err != nil {
			return err
		}
		if !v.denied {
			return errors.New("allowed, want denied: " + strings.Join(v.warnings, "; "))
		}
		return nil
	}
}

// waitFor polls cond every 200ms until it holds and returns how long that
// took, or fails t after timeout with what cond last said.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		last = why
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
	return 0
}
