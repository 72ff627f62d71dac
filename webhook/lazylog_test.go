package webhook

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// countingSink counts the values added to it.
type countingSink struct {
	logr.LogSink
	added *int
}

func (c countingSink) WithValues(kv ...any) logr.LogSink {
	*c.added++
	return countingSink{c.LogSink.WithValues(kv...), c.added}
}

func (c countingSink) WithName(name string) logr.LogSink {
	return countingSink{c.LogSink.WithName(name), c.added}
}

// TestLazyValues logs the same lines through a logger with values added at
// once and one with them added lazily: the output must be the same, and the
// lazy one must add nothing to its sink while nothing is logged.
func TestLazyValues(t *testing.T) {
	for _, tt := range []struct {
		name string
		log  func(logr.Logger)
	}{
		{"nothing logged", func(logr.Logger) {}},
		{"info", func(l logr.Logger) { l.Info("evaluated", "allowed", false) }},
		{"disabled level only", func(l logr.Logger) { l.V(3).Info("evaluated", "allowed", true) }},
		{"enabled level", func(l logr.Logger) { l.V(1).Info("evaluated", "allowed", true) }},
		{"error", func(l logr.Logger) { l.Error(errors.New("boom"), "panic while judging a DaemonSet") }},
		{"more values and a name", func(l logr.Logger) {
			l.WithValues("rule", "privileged").WithName("handler").Info("bypass", "user", "alice")
			l.Info("twice")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var eager, lazy strings.Builder
			var added int
			newLogger := func(out *strings.Builder) logr.Logger {
				l := funcr.New(func(prefix, args string) { out.WriteString(prefix + " " + args + "\n") }, funcr.Options{Verbosity: 1})
				return l.WithSink(countingSink{l.GetSink(), &added}).WithName("admission")
			}
			tt.log(newLogger(&eager).WithValues("requestID", "uid-1", "user", "alice"))
			added = 0
			tt.log(lazyValues(newLogger(&lazy)).WithValues("requestID", "uid-1", "user", "alice"))
			if eager.String() != lazy.String() {
				t.Errorf("lazy output differs:\n%s\neager:\n%s", lazy.String(), eager.String())
			}
			if eager.Len() == 0 && added != 0 {
				t.Errorf("values were added to the sink %d times with nothing logged", added)
			}
		})
	}
}
