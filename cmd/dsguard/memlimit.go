package main

import (
	"fmt"
	"strconv"
	"strings"
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
