package framework

import (
	"context"
	"sync"
	"sync/atomic"
)

// Load keeps requests flowing while a test changes something underneath
// them (a certificate renewal, a restart): each worker sends the next
// request as soon as the last one is answered, and every failure counts.
type Load struct {
	sent, failed atomic.Int64
	first        atomic.Value // the first failure's message
	stop         context.CancelFunc
	wg           sync.WaitGroup
}

// StartLoad starts workers goroutines, each calling probe in a loop until
// Stop or ctx ends; probe's error is a failed request.
func StartLoad(ctx context.Context, workers int, probe func(context.Context) error) *Load {
	l := &Load{}
	ctx, l.stop = context.WithCancel(ctx)
	for range workers {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				err := probe(ctx)
				if ctx.Err() != nil {
					return // cut short by Stop, not failed
				}
				l.sent.Add(1)
				if err != nil {
					l.failed.Add(1)
					l.first.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	return l
}

// Sent returns how many requests were answered so far.
func (l *Load) Sent() int64 { return l.sent.Load() }

// Stop ends the load, waits for the workers and returns the requests sent,
// those that failed and the first failure's message. It is safe to call
// more than once.
func (l *Load) Stop() (sent, failed int64, first string) {
	l.stop()
	l.wg.Wait()
	first, _ = l.first.Load().(string)
	return l.sent.Load(), l.failed.Load(), first
}
