package clusterview

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// TestFreshness_EventsCountOnceBuilt: node events are contact only once the
// view is built (the clock starts then, with the watch deemed healthy), and
// each one after that clears a watch failure and resets the age.
func TestFreshness_EventsCountOnceBuilt(t *testing.T) {
	v := &NodeView{Log: logr.Discard()}
	v.broken.Store(true)
	v.heardEvent()
	if v.Age() != 0 {
		t.Fatalf("age %v after an event before the build, want 0", v.Age())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // no probe loop
	v.trackFreshness(ctx)
	if v.Age() == 0 || v.broken.Load() {
		t.Fatalf("after the build: age %v broken %v, want a running clock and a healthy watch", v.Age(), v.broken.Load())
	}
	v.touch(time.Now().Add(-time.Hour))
	v.broken.Store(true)
	v.heardEvent()
	if v.Age() > time.Minute || v.broken.Load() {
		t.Errorf("after an event: age %v broken %v, want fresh and healthy", v.Age(), v.broken.Load())
	}
}
