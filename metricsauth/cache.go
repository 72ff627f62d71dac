package metricsauth

import (
	"sync"
	"time"
)

// expiring is a bounded map whose entries lapse after their time to live.
// It is not apimachinery's LRUExpireCache on purpose: at its bound an LRU
// evicts the least recently used entry, so a flood of made-up tokens would
// push out the scraper's real one between two scrapes; this map keeps what
// it holds and refuses newcomers instead, and those are asked of the API
// server (rate-limited), which is what a full cache must do anyway.
type expiring[V any] struct {
	mu      sync.Mutex
	max     int
	now     func() time.Time
	entries map[string]entry[V]
}

type entry[V any] struct {
	value   V
	expires time.Time
}

func newExpiring[V any](max int, now func() time.Time) *expiring[V] {
	return &expiring[V]{max: max, now: now, entries: map[string]entry[V]{}}
}

func (c *expiring[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put remembers value for ttl. When the map is full it first drops what has
// lapsed; when it is still full the value is not remembered, so that what
// is held stays bounded and the entries in use are not pushed out by a
// flood of new keys.
func (c *expiring[V]) put(key string, value V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.max {
			return
		}
	}
	c.entries[key] = entry[V]{value: value, expires: now.Add(ttl)}
}
