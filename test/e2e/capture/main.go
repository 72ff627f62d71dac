// Command capture records the AdmissionReviews a real kube-apiserver sends for
// DaemonSets (kubectl create, apply, server-side apply, server dry runs and
// updates of the examples) and writes them as the corpus of the webhook
// package's FuzzDaemonSetReview, so that the fuzzer starts from real requests.
// Usage: hack/run-isolated.sh go run ./test/e2e/capture [-out DIR]
package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

func main() {
	out := flag.String("out", "webhook/testdata/fuzz/FuzzDaemonSetReview", "corpus directory, relative to the repository root")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *out); err != nil {
		fmt.Fprintln(os.Stderr, "capture:", err)
		os.Exit(1)
	}
}

// recorder answers every review with "allowed" and keeps its body.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	rec.mu.Lock()
	rec.bodies = append(rec.bodies, body)
	rec.mu.Unlock()
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(review)
}

func run(ctx context.Context, out string) error {
	cluster, err := framework.Start(ctx, framework.Options{Nodes: framework.SmallCluster, Log: os.Stderr})
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Stop() }()

	ca, err := framework.NewTestCA("capture-ca")
	if err != nil {
		return err
	}
	certDir, err := os.MkdirTemp("", "dsguard-capture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(certDir)
	if _, err := ca.WriteServingCert(certDir); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	rec := &recorder{}
	srv := &http.Server{Handler: rec}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	port := ln.Addr().(*net.TCPAddr).Port
	config := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: capture
webhooks:
  - name: capture.dsguard.io
    clientConfig:
      url: https://127.0.0.1:%d/capture
      caBundle: %s
    rules:
      - apiGroups: [apps]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [daemonsets]
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: capture
    failurePolicy: Fail
    sideEffects: None
    admissionReviewVersions: [v1]
    timeoutSeconds: 5
`, port, base64.StdEncoding.EncodeToString(ca.PEM))
	steps := [][]string{{"create", "namespace", "capture"}}
	if r := cluster.Kubectl(ctx, config, "apply", "-f", "-"); r.Err != nil {
		return r.Error()
	}
	for _, s := range steps {
		if r := cluster.Kubectl(ctx, "", s...); r.Err != nil {
			return r.Error()
		}
	}
	examples, err := filepath.Glob(filepath.Join(cluster.Root, "examples", "*.yaml"))
	if err != nil {
		return err
	}
	for _, path := range examples {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), "kind: DaemonSet") {
			continue
		}
		manifest := strings.ReplaceAll(string(data), "namespace: monitoring", "namespace: capture")
		manifest = strings.ReplaceAll(manifest, "namespace: logging", "namespace: capture")
		relabelled := strings.Replace(manifest, "\nspec:\n", "\n  annotations:\n    capture.dsguard.io/step: update\nspec:\n", 1)
		// Denials by dsguard are expected; the recorder sees the request anyway.
		for _, args := range [][]string{
			{"apply", "--dry-run=server", "-f", "-"},
			{"apply", "--server-side", "--dry-run=server", "-f", "-"},
			{"create", "-f", "-"},
			{"apply", "-f", "-"},
		} {
			cluster.Kubectl(ctx, manifest, args...)
		}
		cluster.Kubectl(ctx, relabelled, "apply", "--server-side", "--force-conflicts", "-f", "-")
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	dir := filepath.Join(cluster.Root, out)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, body := range rec.bodies {
		name := filepath.Join(dir, fmt.Sprintf("apiserver-review-%02d", i+1))
		if err := os.WriteFile(name, []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", body)), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("wrote %d AdmissionReviews from kube-apiserver to %s\n", len(rec.bodies), out)
	return nil
}
