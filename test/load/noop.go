package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // the profile endpoints of -pprof
	"os"
	"os/signal"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	dswebhook "github.com/dsguard/dsguard/webhook"
)

const (
	// noopCommand runs the harness binary as the no-op webhook.
	noopCommand   = "noop-webhook"
	noopReadyPath = "/readyz"
	noopWarning   = "no-op webhook"
)

// runNoop serves a controller-runtime admission webhook that allows every
// DaemonSet without looking at it: the floor dsguard is compared against. It
// uses controller-runtime's webhook server with the TLS settings of `dsguard
// serve` (dswebhook.HardenTLS: TLS 1.2 at least, the same cipher suites,
// HTTP/1.1), so the difference is what dsguard does per request.
func runNoop(args []string) error {
	fs := flag.NewFlagSet(noopCommand, flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "listen address")
	port := fs.Int("port", 9444, "listen port")
	certDir := fs.String("cert-dir", "", "directory with tls.crt and tls.key")
	pprofAddr := fs.String("pprof", "", "address of Go's profiling endpoints (none when empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pprofAddr != "" {
		go func() {
			srv := &http.Server{Addr: *pprofAddr, ReadHeaderTimeout: 5 * time.Second}
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintln(os.Stderr, "no-op webhook: profiling endpoints:", err)
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv := webhook.NewServer(webhook.Options{Host: *host, Port: *port, CertDir: *certDir,
		TLSOpts: []func(*tls.Config){dswebhook.HardenTLS}})
	srv.Register(daemonSetURL, &admission.Webhook{Handler: admission.HandlerFunc(
		func(_ context.Context, req admission.Request) admission.Response {
			if req.Name == pingName {
				// Tells the harness that the API server calls this webhook.
				return admission.Allowed("").WithWarnings(noopWarning)
			}
			return admission.Allowed("")
		})})
	srv.Register(noopReadyPath, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	return srv.Start(ctx)
}
