//go:build !offline

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// drainingSignalContext returns a context that ends delay after the first
// SIGTERM or SIGINT; drain runs at once on that signal, so the webhook keeps
// answering (with "Connection: close") while the API server moves its
// connections elsewhere, and only then does the manager shut down. A second
// signal exits at once, as controller-runtime's handler does.
func drainingSignalContext(log logr.Logger, delay time.Duration, drain func()) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		drain()
		log.Info("shutting down: draining connections first", "drainDelay", delay)
		select {
		case <-time.After(delay):
		case <-signals:
			os.Exit(1)
		}
		cancel()
		<-signals
		os.Exit(1)
	}()
	return ctx
}
