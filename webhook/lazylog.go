package webhook

import (
	"slices"
	"sync"

	"github.com/go-logr/logr"
)

// lazyValues returns base with keysAndValues added only when a line is
// logged. A review's logger carries its UID, object and user (as
// controller-runtime's admission.Webhook sets it up), but most reviews log
// nothing, and zap encodes added values at once: about a twentieth of the
// CPU of an ordinary review went into values nobody read.
func lazyValues(base logr.Logger, keysAndValues ...any) logr.Logger {
	if base.GetSink() == nil {
		return base
	}
	return base.WithSink(&lazySink{base: base.GetSink(), values: keysAndValues})
}

// lazySink adds values to base on the first line logged.
type lazySink struct {
	base   logr.LogSink
	values []any

	once  sync.Once
	built logr.LogSink
}

func (s *lazySink) sink() logr.LogSink {
	s.once.Do(func() {
		s.built = s.base
		if len(s.values) > 0 {
			s.built = s.base.WithValues(s.values...)
		}
		// This sink is one more frame between the caller and the
		// real sink.
		if cd, ok := s.built.(logr.CallDepthLogSink); ok {
			s.built = cd.WithCallDepth(1)
		}
	})
	return s.built
}

// Init implements logr.LogSink; base was initialised when it was made.
func (s *lazySink) Init(logr.RuntimeInfo) {}

// Enabled implements logr.LogSink.
func (s *lazySink) Enabled(level int) bool { return s.base.Enabled(level) }

// Info implements logr.LogSink.
func (s *lazySink) Info(level int, msg string, keysAndValues ...any) {
	s.sink().Info(level, msg, keysAndValues...)
}

// Error implements logr.LogSink.
func (s *lazySink) Error(err error, msg string, keysAndValues ...any) {
	s.sink().Error(err, msg, keysAndValues...)
}

// WithValues implements logr.LogSink, still lazily.
func (s *lazySink) WithValues(keysAndValues ...any) logr.LogSink {
	return &lazySink{base: s.base, values: append(slices.Clip(s.values), keysAndValues...)}
}

// WithName implements logr.LogSink.
func (s *lazySink) WithName(name string) logr.LogSink {
	return &lazySink{base: s.base.WithName(name), values: s.values}
}

// WithCallDepth implements logr.CallDepthLogSink.
func (s *lazySink) WithCallDepth(depth int) logr.LogSink {
	base := s.base
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		base = cd.WithCallDepth(depth)
	}
	return &lazySink{base: base, values: s.values}
}
