//go:build !unix

package testobj

import "time"

// CPUTime is not read on this platform: it reports false.
func CPUTime() (time.Duration, bool) { return 0, false }
