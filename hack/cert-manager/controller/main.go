// Command controller is cert-manager's controller cut down to what dsguard's
// chart uses: the Certificate controllers, CertificateRequest approval, and
// the self-signed and CA issuers. It runs against the e2e test API server as a
// process; hack/tools.sh builds it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	// Each controller package registers itself with controllerpkg in init.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuer kinds the issuers controller can set up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

// controllers are the ones started, by their registered names.
var controllers = []string{
	"issuers",
	"certificaterequests-approver",
	"certificaterequests-issuer-ca",
	"certificaterequests-issuer-selfsigned",
	"certificates-trigger",
	"certificates-issuing",
	"certificates-key-manager",
	"certificates-request-manager",
	"certificates-readiness",
	"certificates-revision-manager",
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	namespace := flag.String("namespace", "", "only this namespace (empty: all)")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager controller:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, klog.Background(), "controller")

	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   100,
		KubernetesAPIBurst: 200,
		Namespace:          namespace,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: "cert-manager"},
		CertificateOptions: controllerpkg.CertificateOptions{
			// Short backoffs: a test must not wait an hour after a failure.
			CertificateRequestMinimumBackoffDuration: time.Second,
			CertificateRequestMaximumBackoffDuration: 10 * time.Second,
		},
	})
	if err != nil {
		return err
	}
	known := controllerpkg.Known()
	var wg sync.WaitGroup
	errs := make(chan error, len(controllers))
	var shared *controllerpkg.Context
	for _, name := range controllers {
		constructor, ok := known[name]
		if !ok {
			return fmt.Errorf("cert-manager has no controller %q", name)
		}
		c, err := constructor(factory)
		if err != nil {
			return fmt.Errorf("setting up %s: %w", name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(5, ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	// Every Context the factory builds shares these informer factories; start
	// them once the controllers have registered their informers.
	if shared, err = factory.Build(); err != nil {
		return err
	}
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	klog.InfoS("cert-manager controllers started", "controllers", controllers)
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	wg.Wait()
	return nil
}
