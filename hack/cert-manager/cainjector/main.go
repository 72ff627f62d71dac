// Command cainjector is cert-manager's cainjector for ValidatingWebhookConfigurations:
// it copies the CA of the Certificate named in the annotation
// cert-manager.io/inject-ca-from into every webhook's caBundle. It runs against
// the e2e test API server as a process; hack/tools.sh builds it.
package main

import (
	"flag"
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/util"
)

func main() {
	// --kubeconfig is controller-runtime's flag.
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager cainjector:", err)
		os.Exit(1)
	}
}

func run() error {
	ctrl.SetLogger(klog.Background())
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// The cainjector applies the caBundle with its user agent's prefix as
	// field manager.
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cmapi.AddToScheme, admissionregistrationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor:        map[string]bool{cainjector.ValidatingWebhookConfigurationName: true},
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
