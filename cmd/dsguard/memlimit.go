//go:build !offline

package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// memoryLimitEnv carries the container's memory limit in bytes: the chart
// sets it from limits.memory through the downward API.
const memoryLimitEnv = "DSGUARD_MEMORY_LIMIT"

// memoryLimitPercent of the container's limit becomes the Go runtime's soft
// memory limit (GOMEMLIMIT): the garbage collector works harder as the heap
// nears it, long before the kernel would kill the container, and the rest is
// room for what the runtime does not count (binary, thread stacks, page
// rounding).
const memoryLimitPercent = 90

// softMemoryLimit returns the soft memory limit to set from the environment
// (getenv), or false when there is none to set: GOMEMLIMIT set by hand wins
// (the runtime has already applied it), and without a container limit the
// runtime's default (no limit) stays.
func softMemoryLimit(getenv func(string) string) (int64, bool, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false, nil
	}
	v := strings.TrimSpace(getenv(memoryLimitEnv))
	if v == "" {
		return 0, false, nil
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil || limit <= 0 {
		return 0, false, fmt.Errorf("%s=%q is not a memory size in bytes; the Go runtime keeps no soft memory limit", memoryLimitEnv, v)
	}
	return limit / 100 * memoryLimitPercent, true, nil
}

// startupGCPercent is the garbage collector's target while a replica lists
// the nodes (see collectAfterStartup).
const startupGCPercent = 25

// startupGCFor bounds how long startupGCPercent holds when the first list
// never arrives (no RBAC for Nodes, an API server out of reach): such a
// replica is not ready, but it must not pay the tighter target for good.
const startupGCFor = 5 * time.Minute

// collectAfterStartup keeps the first list of nodes, a replica's largest
// transient, from setting its memory. While the list streams in, every node
// of the fleet is live at once (about 1.4 KB each, stripped: some 86 MiB at
// 65,000 nodes), and with the default target the collector lets the heap
// grow to twice that before it runs; afterwards the node set holds about
// 220 bytes per node, but the heap stays near the peak until the runtime's
// periodic collection (every two minutes) and its scavenger give the memory
// back. Until built is closed (or startupGCFor has passed) the target is
// startupGCPercent, a few more collections while the list arrives; then the
// target comes back and, once the reflector has dropped its list, the heap
// is collected and returned to the operating system at once. A GOGC set by
// hand is left alone.
func collectAfterStartup(ctx context.Context, log logr.Logger, built <-chan struct{}, getenv func(string) string) {
	if getenv("GOGC") != "" {
		return
	}
	previous := debug.SetGCPercent(startupGCPercent)
	go func() {
		defer debug.SetGCPercent(previous)
		select {
		case <-ctx.Done():
			return
		case <-time.After(startupGCFor):
			return
		case <-built:
		}
		debug.SetGCPercent(previous)
		// The reflector hands its list over in one call and drops it when
		// that call returns, just after built is closed; a second is
		// ample, and a collection that comes early only misses the list.
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		start := time.Now()
		debug.FreeOSMemory()
		log.V(1).Info("collected the first list of nodes", "took", time.Since(start))
	}()
}
