package main

import (
	"context"
	"crypto/tls"
	"flag"
	"net/http"
	"os/signal"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const (
	// noopCommand runs the harness binary as the no-op webhook.
	noopCommand   = "noop-webhook"
	noopReadyPath = "/readyz"
	noopWarning   = "no-op webhook"
)

// runNoop serves a controller-runtime admission webhook that allows every
// DaemonSet without looking at it: the floor dsguard is compared against. It
// uses the same webhook server and TLS settings as `dsguard serve` (TLS 1.2
// at least, HTTP/1.1), so the difference is what dsguard does per request.
func runNoop(args []string) error {
	fs := flag.NewFlagSet(noopCommand, flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "listen address")
	port := fs.Int("port", 9444, "listen port")
	certDir := fs.String("cert-dir", "", "directory with tls.crt and tls.key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv := webhook.NewServer(webhook.Options{Host: *host, Port: *port, CertDir: *certDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS12
			c.NextProtos = []string{"http/1.1"}
		}}})
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
