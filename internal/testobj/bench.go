package testobj

import (
	"runtime"
	"testing"
)

// ReportCPUPerOp runs b's loop through loop and reports the process's CPU
// time per operation as cpu-ns/op (nothing where it cannot be read).
func ReportCPUPerOp(b *testing.B, loop func()) {
	start, ok := CPUTime()
	n := 0
	for b.Loop() {
		loop()
		n++
	}
	if end, ok2 := CPUTime(); ok && ok2 && n > 0 {
		b.ReportMetric(float64(end-start)/float64(n), "cpu-ns/op")
	}
}

// LiveHeap returns the live heap after a full collection: what a benchmark
// reports as memory held, as the difference of two calls.
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
