package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // the profile endpoints of -pprof
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	dswebhook "github.com/dsguard/dsguard/webhook"
)

const (
	// noopCommand runs the harness binary as the no-op webhook.
	noopCommand   = "noop-webhook"
	noopReadyPath = "/readyz"
	noopWarning   = "no-op webhook"
	// recordName is the DaemonSet whose review the no-op webhook records
	// (see -record): the body of the direct load.
	recordName = "direct"
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
	record := fs.String("record", "", "file to write the AdmissionReview of the DaemonSet named "+recordName+" into, as the API server sent it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	servePprof(*pprofAddr, "no-op webhook")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var recorded atomic.Bool
	srv := webhook.NewServer(webhook.Options{Host: *host, Port: *port, CertDir: *certDir,
		TLSOpts: []func(*tls.Config){dswebhook.HardenTLS}})
	srv.Register(daemonSetURL, &admission.Webhook{Handler: admission.HandlerFunc(
		func(_ context.Context, req admission.Request) admission.Response {
			switch {
			case req.Name == pingName:
				// Tells the harness that the API server calls this webhook.
				return admission.Allowed("").WithWarnings(noopWarning)
			case req.Name == recordName && *record != "" && recorded.CompareAndSwap(false, true):
				// The first only: the direct load sends reviews of the
				// same name, and a no-op must stay a no-op.
				if err := recordReview(*record, req); err != nil {
					return admission.Errored(http.StatusInternalServerError, err)
				}
			}
			return admission.Allowed("")
		})})
	srv.Register(noopReadyPath, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	return srv.Start(ctx)
}

// recordReview writes req as the AdmissionReview the API server sent. The
// object stays the API server's own bytes (a RawExtension); the rest is
// encoded from the same structs the API server encodes.
func recordReview(path string, req admission.Request) error {
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	}
	data, err := json.Marshal(review)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// servePprof serves Go's profiling endpoints on addr, when it is set, so
// that the harness can profile a floor beside dsguard.
func servePprof(addr, who string) {
	if addr == "" {
		return
	}
	go func() {
		srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second}
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "%s: profiling endpoints: %v\n", who, err)
		}
	}()
}
