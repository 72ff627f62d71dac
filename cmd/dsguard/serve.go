//go:build !offline

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/dsguard/dsguard/audit"
	"github.com/dsguard/dsguard/certs"
	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/metricsauth"
	dswebhook "github.com/dsguard/dsguard/webhook"
)

type serveOptions struct {
	namespace       string
	policyName      string
	granterRole     string
	policyKey       string
	host            string
	port            int
	certDir         string
	certName        string
	keyName         string
	metricsAddr     string
	metricsSecure   bool
	probeAddr       string
	probeMaxConns   int
	pprofAddr       string
	shutdownTimeout time.Duration
	drainDelay      time.Duration
	nodeStaleAfter  time.Duration
	leaderElect     bool
	lease           auditLeaseTiming
	auditInterval   time.Duration
	gapWindow       time.Duration
	certMode        string
	caSecret        string
	webhookConfig   string
	certDNSNames    []string
	caDuration      time.Duration
	leafDuration    time.Duration
	caPublishGrace  time.Duration
	caSyncInterval  time.Duration
	clientCAFile    string
	requireClient   bool
	clientIDs       []string
	apiServerAddrs  []string
	maxConnections  int
	metricsMaxConns int
	readTimeout     time.Duration
	failOpen        []string
	apiCompression  bool
	fit             bool
	modes           modeOptions
	zap             zap.Options
}

func newServeCommand() *cobra.Command {
	o := serveOptions{zap: zap.Options{Development: false}}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the validating admission webhook",
		Long: "Serve runs the admission webhook for apps/v1 DaemonSets, for the policy ConfigMap and for\n" +
			"changes people make to Nodes' taints and labels (the node-change rule).\n" +
			"The policy is read from a ConfigMap and reloaded live; an invalid edit keeps the last good policy.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(&o) },
	}
	f := cmd.Flags()
	defaultNS := os.Getenv("POD_NAMESPACE")
	if defaultNS == "" {
		defaultNS = "dsguard-system"
	}
	f.StringVar(&o.namespace, "namespace", defaultNS, "dsguard's own namespace: holds the policy ConfigMap and is never evaluated (default $POD_NAMESPACE)")
	f.StringVar(&o.granterRole, "exemption-granter-clusterrole", "", "the ClusterRole that lets its subjects grant exemptions (exemptions.grantedByRBAC), named in refusals")
	f.StringVar(&o.policyName, "policy-configmap", "dsguard-policy", "name of the policy ConfigMap")
	f.StringVar(&o.policyKey, "policy-key", "policy.yaml", "key of the policy document in the ConfigMap")
	f.StringVar(&o.host, "host", "", "address the webhook server listens on (empty: all)")
	f.IntVar(&o.port, "port", 9443, "webhook server port")
	f.StringVar(&o.certDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with the serving certificate and key; reloaded when the files change")
	f.StringVar(&o.certName, "cert-name", "tls.crt", "certificate file name in --cert-dir")
	f.StringVar(&o.keyName, "key-name", "tls.key", "key file name in --cert-dir")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "metrics address; 0 disables metrics")
	f.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS with Kubernetes authentication and authorization")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 disables them")
	f.IntVar(&o.probeMaxConns, "health-probe-max-connections", dswebhook.DefaultProbeMaxConnections, "open connections to the health probe port at most; at the cap a new connection evicts one of the source holding the most (the kubelet opens one per probe)")
	f.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's profiling endpoints (/debug/pprof/), unauthenticated: bind it to localhost only; 0 disables them")
	f.DurationVar(&o.nodeStaleAfter, "node-staleness-bound", clusterview.DefaultStaleAfter, "a node view not confirmed by the API server for this long is stale: node-aware rules then judge without live nodes and say so")
	f.DurationVar(&o.drainDelay, "drain-delay", 2*time.Second, "after SIGTERM, how long to keep answering (unready, closing each connection after its answer) before shutting down")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 25*time.Second, "how long to let in-flight reviews finish on shutdown")
	f.DurationVar(&o.auditInterval, "audit-interval", 30*time.Second, "how often the leader re-audits every DaemonSet without a change")
	f.DurationVar(&o.gapWindow, "gap-window", 5*time.Minute, "a coverage gap (ready < desired) lasting longer than this is persistent")
	f.StringVar(&o.certMode, "cert-mode", "file", "where the serving certificate comes from: file (--cert-dir, e.g. a cert-manager Secret; reloaded on change) or self-managed (a CA in --ca-secret, caBundle kept in step)")
	f.StringVar(&o.caSecret, "ca-secret", "dsguard-ca", "self-managed: Secret in --namespace holding the CA (created when missing)")
	f.StringVar(&o.webhookConfig, "webhook-config-name", "dsguard", "self-managed: the ValidatingWebhookConfiguration whose caBundle dsguard keeps in step")
	f.StringSliceVar(&o.certDNSNames, "cert-dns-names", nil, "self-managed: DNS names of the serving certificate (the Service's names)")
	f.DurationVar(&o.caDuration, "ca-duration", 365*24*time.Hour, "self-managed: CA lifetime; renewed with a third left")
	f.DurationVar(&o.leafDuration, "leaf-duration", 7*24*time.Hour, "self-managed: serving certificate lifetime; renewed with a third left")
	f.DurationVar(&o.caPublishGrace, "ca-publish-grace", 10*time.Second, "self-managed: how long a new CA is in the caBundle before certificates it signs are served")
	f.DurationVar(&o.caSyncInterval, "ca-sync-interval", 5*time.Second, "self-managed: how often the caBundle is checked against the CA")
	f.StringVar(&o.clientCAFile, "client-ca-file", "", "PEM bundle of the CAs whose client certificates authenticate the API server; verdicts name nodes only to authenticated callers")
	f.BoolVar(&o.requireClient, "require-client-cert", false, "refuse callers without a client certificate from --client-ca-file naming one of --client-identities")
	f.StringSliceVar(&o.apiServerAddrs, "api-server-addresses", nil, "without --client-ca-file: the addresses or CIDRs the API server calls dsguard from (the chart passes what default/kubernetes advertises); their requests keep a reserved share of the large-body budget and the heavy lane, and once the API server was seen there, reviews from other sources are answered but counted apart (result=\"unverified\"). Not an identity: no verdict depends on it")
	f.StringSliceVar(&o.clientIDs, "client-identities", dswebhook.DefaultClientIdentities, "names (subject common name or DNS name) the API server's client certificate may carry; a certificate from --client-ca-file with another name does not authenticate the API server")
	f.IntVar(&o.maxConnections, "max-connections", dswebhook.DefaultMaxConnections, "open connections to the webhook port at most; at the cap a new connection evicts the one stuck longest mid-request")
	f.IntVar(&o.metricsMaxConns, "metrics-max-connections", dswebhook.DefaultMetricsMaxConnections, "open connections to the metrics port at most; at the cap a new connection evicts one of the source holding the most")
	f.DurationVar(&o.readTimeout, "request-read-timeout", dswebhook.DefaultReadTimeout, "time a caller has to send a whole review (headers and body) on a connection")
	f.StringSliceVar(&o.failOpen, "fail-open-namespaces", dswebhook.DefaultFailOpenNamespaces, "infrastructure namespaces where dsguard only warns and its own errors admit with a warning (the webhook entry for them must fail open too)")
	f.BoolVar(&o.fit, "fit", true, "keep what kube-scheduler weighs on each node (allocatable, a compact record of every Pod bound there, PriorityClasses, namespaces' labels; needs list and watch of pods, priorityclasses and namespaces) so that resource-fit and priority-class judge at admission and in the audit, and the conflict rules see the Pods bound to the nodes; off, the first two judge only in dsguard check --nodes with a cluster dump")
	f.BoolVar(&o.apiCompression, "api-compression", false, "ask the API server for gzip-compressed responses (it then compresses every Node update on the node view's watch): off, as kube-controller-manager and kube-scheduler keep it on a cluster network; on for an API server behind a slow link")
	o.modes.bindFlags(cmd)
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect one replica to re-evaluate coverage on node changes and emit Events (a Lease in --namespace)")
	f.DurationVar(&o.lease.duration, "audit-lease-duration", audit.DefaultLeaseDuration, "how long the audit Lease holds without a renewal: the longest a vanished leader keeps the others from auditing")
	f.DurationVar(&o.lease.renewDeadline, "audit-lease-renew-deadline", audit.DefaultRenewDeadline, "how long the audit leader keeps trying to renew before it stops auditing (less than --audit-lease-duration)")
	f.DurationVar(&o.lease.retryPeriod, "audit-lease-retry-period", audit.DefaultRetryPeriod, "how often the audit leader renews the Lease and the others try to take it")
	gofs := flag.NewFlagSet("", flag.ContinueOnError)
	o.zap.BindFlags(gofs)
	f.AddGoFlagSet(gofs)
	// --kubeconfig, registered by controller-runtime on the standard flag set.
	if kf := flag.CommandLine.Lookup("kubeconfig"); kf != nil {
		f.AddGoFlag(kf)
	}
	return cmd
}

// runServe wires dsguard: the manager with its caches, the informer-fed
// views of the cluster, the auditor, the admission handlers and the health
// checks. Each step is one function below.
func runServe(o *serveOptions) error {
	if err := o.lease.validate(); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("serve")
	setMemoryLimit(log)
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	// Go's HTTP transport asks for gzip unless told not to, and the API
	// server compresses a streamed list (the node view's watch) when asked:
	// every Node update, status reports included, is then compressed on one side
	// and decompressed on the other. On a cluster network that costs CPU on
	// both and saves nothing worth it.
	restConfig.DisableCompression = !o.apiCompression
	// TLS 1.2 at least, AEAD suites only, HTTP/2 off.
	tlsOpts := []func(*tls.Config){dswebhook.HardenTLS}
	selfManaged, webhookTLSOpts, err := o.certificates(restConfig, scheme, tlsOpts)
	if err != nil {
		return err
	}
	m := dswebhook.NewMetrics(metrics.Registry)
	metrics.Registry.MustRegister(buildInfo())
	nodes := &clusterview.NodeView{Log: ctrl.Log.WithName("nodes"),
		Freshness: clusterview.Freshness{StaleAfter: o.nodeStaleAfter}}
	mgr, err := o.newManager(restConfig, scheme, webhookTLSOpts, m)
	if err != nil {
		return err
	}
	ref := clusterview.PolicyRef{Namespace: o.namespace, Name: o.policyName, Key: o.policyKey}
	// The last good policy, in a ConfigMap of its own that only dsguard's
	// ServiceAccount writes, read uncached (no informer, no list).
	lastGood := &clusterview.LastGoodStore{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
		Namespace: o.namespace, Name: o.policyName + clusterview.LastGoodSuffix}
	source, err := addClusterView(mgr, ref, lastGood, nodes)
	if err != nil {
		return err
	}
	var fitView *clusterview.FitView
	if o.fit {
		if fitView, err = addFitView(mgr, nodes.Built()); err != nil {
			return err
		}
	}
	if err := o.modes.setUp(o, mgr, source, lastGood); err != nil {
		return err
	}
	// The DaemonSets the rules that compare agents read, at admission and
	// in the audit.
	daemonSets, err := clusterview.NewDaemonSetLister(context.Background(), mgr.GetCache())
	if err != nil {
		return fmt.Errorf("DaemonSet informer: %w", err)
	}
	if err := o.addAuditor(mgr, source, nodes, fitView, daemonSets); err != nil {
		return err
	}
	if err := o.registerWebhooks(mgr, scheme, ref, source, nodes, fitView, daemonSets, m); err != nil {
		return err
	}
	webhookServer := mgr.GetWebhookServer().(*dswebhook.Server)
	readiness := []namedCheck{{"policy", source.ReadyCheck}, {"nodes", nodes.ReadyCheck},
		{"webhook", webhookServer.StartedChecker()}, {"draining", webhookServer.DrainingChecker}}
	if fitView != nil {
		readiness = append(readiness, namedCheck{"fit", fitView.ReadyCheck})
	}
	if selfManaged != nil {
		selfManaged.SetRecorder(mgr.GetEventRecorder("dsguard"))
		if err := mgr.Add(selfManaged); err != nil {
			return err
		}
		readiness = append(readiness, namedCheck{"certificate", selfManaged.ReadyCheck})
	}
	if err := o.addHealthChecks(mgr, readiness); err != nil {
		return err
	}
	log.Info("starting", "version", versionString(), "namespace", o.namespace, "policy", ref.String(), "port", o.port)
	ctx := drainingSignalContext(log, o.drainDelay, webhookServer.Drain)
	collectAfterStartup(ctx, log, nodes.Built(), os.Getenv)
	return mgr.Start(ctx)
}

// setMemoryLimit sets Go's soft memory limit from the container's, when the
// chart passes it on.
func setMemoryLimit(log logr.Logger) {
	if limit, ok, err := softMemoryLimit(os.Getenv); err != nil {
		log.Error(err, "memory limit")
	} else if ok {
		debug.SetMemoryLimit(limit)
		log.Info("Go soft memory limit set from the container's", "bytes", limit, "percent", memoryLimitPercent)
	}
}

// newScheme knows the built-in kinds and OpenReports' Report.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := openreportsv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// certificates sets up where the serving certificate comes from: files
// (nothing to run) or the self-managed CA, which then serves the
// certificates through the returned TLS options.
func (o *serveOptions) certificates(restConfig *rest.Config, scheme *runtime.Scheme,
	tlsOpts []func(*tls.Config)) (*certs.SelfManaged, []func(*tls.Config), error) {
	switch o.certMode {
	case "file":
		return nil, tlsOpts, nil
	case "self-managed":
	default:
		return nil, nil, fmt.Errorf("unknown --cert-mode %q (want file or self-managed)", o.certMode)
	}
	if len(o.certDNSNames) == 0 {
		return nil, nil, fmt.Errorf("--cert-mode=self-managed needs --cert-dns-names")
	}
	direct, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	selfManaged := certs.NewSelfManaged(certs.SelfManagedOptions{
		Namespace: o.namespace, SecretName: o.caSecret, WebhookConfigName: o.webhookConfig,
		DNSNames: o.certDNSNames, CADuration: o.caDuration, LeafDuration: o.leafDuration,
		PublishGrace: o.caPublishGrace, SyncInterval: o.caSyncInterval,
		RESTConfig: restConfig, Client: direct, Log: ctrl.Log.WithName("certs"),
		Metrics: certs.NewMetrics(metrics.Registry),
	})
	webhookTLSOpts := append(append([]func(*tls.Config){}, tlsOpts...), func(c *tls.Config) {
		c.GetCertificate = selfManaged.GetCertificate
	})
	return selfManaged, webhookTLSOpts, nil
}

// newManager builds the manager: caches restricted to what dsguard reads,
// the metrics and probe endpoints, and the hardened webhook server.
func (o *serveOptions) newManager(restConfig *rest.Config, scheme *runtime.Scheme,
	webhookTLSOpts []func(*tls.Config), m *dswebhook.Metrics) (ctrl.Manager, error) {
	// controller-runtime's own webhook server never times out a slow
	// request body and accepts connections without limit.
	apiServer, err := parseAddresses(o.apiServerAddrs)
	if err != nil {
		return nil, fmt.Errorf("--api-server-addresses: %w", err)
	}
	webhookServer := dswebhook.NewServer(dswebhook.ServerOptions{
		Host: o.host, Port: o.port, CertDir: o.certDir, CertName: o.certName, KeyName: o.keyName,
		TLSOpts: webhookTLSOpts, ClientCAFile: o.clientCAFile, RequireClientCert: o.requireClient, ClientIdentities: o.clientIDs,
		MaxConnections: o.maxConnections, ReadTimeout: o.readTimeout, HeavyWaiting: m.HeavyWaiting, Refusals: m.Refusals,
		APIServerAddresses: apiServer,
	}, m.ConnectionsEvicted.Inc)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		// No Nodes: the node view lists and watches them itself and keeps
		// no Node objects (clusterview.NodeView); nothing reads them from
		// the manager's cache or client.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// Only the one policy ConfigMap: dsguard never lists or holds
			// other ConfigMaps.
			&corev1.ConfigMap{}: {
				Namespaces: map[string]cache.Config{o.namespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", o.policyName),
			},
			// DaemonSets: the auditor reads metadata, spec and status.
			&appsv1.DaemonSet{}: {Transform: cache.TransformStripManagedFields()},
		}},
		// No manager-wide election: the auditor has a Lease of its own
		// (audit.Elected), so losing it never stops admission.
		LeaderElection: false,
		// controller-runtime's metrics server is off: it accepts
		// connections without limit, so dsguard serves the port itself
		// (addMetricsServer).
		Metrics: metricsserver.Options{BindAddress: "0"},
		// controller-runtime's probe server is off: it accepts
		// connections without limit, so dsguard serves the port itself
		// (addHealthChecks).
		HealthProbeBindAddress:  "0",
		PprofBindAddress:        o.pprofAddr,
		GracefulShutdownTimeout: &o.shutdownTimeout,
		WebhookServer:           webhookServer,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := o.addMetricsServer(mgr, webhookTLSOpts, m); err != nil {
		return nil, err
	}
	return mgr, nil
}

// addMetricsServer serves the metrics registry on --metrics-bind-address:
// HTTPS with Kubernetes authentication and authorization (metricsauth)
// unless --metrics-secure=false, behind a connection cap. Metrics are served
// with the webhook's certificate (its CA is the chart's), so that a scraper
// can verify them instead of skipping verification of a self-signed
// certificate: the files of --cert-dir, or the self-managed certificate
// tlsOpts serves.
func (o *serveOptions) addMetricsServer(mgr ctrl.Manager, tlsOpts []func(*tls.Config), m *dswebhook.Metrics) error {
	if o.metricsAddr == "0" {
		return nil
	}
	var handler http.Handler = promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	if o.metricsSecure {
		filter, err := metricsauth.FilterProvider(mgr.GetConfig(), mgr.GetHTTPClient())
		if err != nil {
			return fmt.Errorf("metrics authentication: %w", err)
		}
		if handler, err = filter(ctrl.Log.WithName("metrics").WithValues("path", "/metrics"), handler); err != nil {
			return fmt.Errorf("metrics authentication: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	return mgr.Add(dswebhook.NewMetricsServer(dswebhook.MetricsServerOptions{
		Addr: o.metricsAddr, Secure: o.metricsSecure, TLSOpts: tlsOpts,
		CertDir: o.certDir, CertName: o.certName, KeyName: o.keyName,
		Handler: mux, MaxConnections: o.metricsMaxConns, OnEvict: m.MetricsConnectionsEvicted.Inc,
	}))
}

// addClusterView adds the policy loader and the node view, which every
// replica runs: each one serves admission.
func addClusterView(mgr ctrl.Manager, ref clusterview.PolicyRef, lastGood *clusterview.LastGoodStore,
	nodes *clusterview.NodeView) (*clusterview.PolicySource, error) {
	source := clusterview.NewPolicySource(clusterview.NewPolicyMetrics(metrics.Registry))
	if err := mgr.Add(&clusterview.PolicyLoader{
		Ref: ref, Cache: mgr.GetCache(), Source: source,
		Recorder: mgr.GetEventRecorder("dsguard"), Log: ctrl.Log.WithName("policy"), LastGood: lastGood,
	}); err != nil {
		return nil, err
	}
	nodeClient, err := kubernetes.NewForConfig(clusterview.NodeClientConfig(mgr.GetConfig()))
	if err != nil {
		return nil, fmt.Errorf("node client: %w", err)
	}
	nodes.Nodes = clusterview.NodeListerWatcher(nodeClient)
	// A list of one node's metadata: the cheapest question that proves the
	// API server answers this replica (see clusterview.Freshness).
	nodes.Probe = func(ctx context.Context) error {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
		return mgr.GetAPIReader().List(ctx, list, client.Limit(1))
	}
	metrics.Registry.MustRegister(nodes.AgeCollector(), nodes.BoundCollector())
	if err := mgr.Add(nodes); err != nil {
		return nil, err
	}
	return source, nil
}

// addFitView adds the view of what kube-scheduler weighs, which every
// replica keeps: each one serves admission.
func addFitView(mgr ctrl.Manager, after <-chan struct{}) (*clusterview.FitView, error) {
	c, err := kubernetes.NewForConfig(clusterview.NodeClientConfig(mgr.GetConfig()))
	if err != nil {
		return nil, fmt.Errorf("fit client: %w", err)
	}
	v := &clusterview.FitView{Log: ctrl.Log.WithName("fit"), After: after}
	v.Nodes, v.Pods, v.PriorityClasses, v.Namespaces = clusterview.FitListerWatchers(c)
	metrics.Registry.MustRegister(v.Collectors()...)
	return v, mgr.Add(v)
}

// auditLease is the Lease in dsguard's namespace that elects the auditor.
const auditLease = "dsguard-coverage"

// auditLeaseTiming is the audit Lease's timing (--audit-lease-*).
type auditLeaseTiming struct{ duration, renewDeadline, retryPeriod time.Duration }

// validate refuses what client-go's leader election would refuse only once
// the manager runs: a renew deadline not under the lease duration, or not
// above the jittered retry period.
func (l auditLeaseTiming) validate() error {
	if l.duration <= 0 || l.renewDeadline <= 0 || l.retryPeriod <= 0 {
		return errors.New("--audit-lease-duration, --audit-lease-renew-deadline and --audit-lease-retry-period must be positive")
	}
	if l.renewDeadline >= l.duration {
		return fmt.Errorf("--audit-lease-renew-deadline (%s) must be less than --audit-lease-duration (%s)", l.renewDeadline, l.duration)
	}
	if float64(l.renewDeadline) <= leaderelection.JitterFactor*float64(l.retryPeriod) {
		return fmt.Errorf("--audit-lease-renew-deadline (%s) must be more than %.1f × --audit-lease-retry-period (%s)",
			l.renewDeadline, leaderelection.JitterFactor, l.retryPeriod)
	}
	return nil
}

// addAuditor adds the auditor and its OpenReports writer, elected by a Lease
// of its own (audit.Elected) unless --leader-elect=false.
func (o *serveOptions) addAuditor(mgr ctrl.Manager, source *clusterview.PolicySource, nodes *clusterview.NodeView,
	fitView *clusterview.FitView, daemonSets *clusterview.DaemonSetLister) error {
	// The auditor's Events go through a sink of their own, which keeps no
	// copy of what it sent (see audit.EventSink).
	events := audit.NewEventSink(mgr.GetClient(), mgr.GetScheme(), "dsguard", ctrl.Log.WithName("events"))
	if err := mgr.Add(events); err != nil {
		return err
	}
	a := &audit.Auditor{
		Cache: mgr.GetCache(), Pods: mgr.GetAPIReader(), Nodes: nodes, Source: source,
		Recorder: events, Log: ctrl.Log.WithName("audit"),
		Metrics: audit.NewMetrics(metrics.Registry), OwnNamespace: o.namespace,
		Interval: o.auditInterval, Window: o.gapWindow,
		Reports: &audit.ReportWriter{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(),
			Log: ctrl.Log.WithName("reports"), Recheck: 2 * o.auditInterval,
		},
	}
	if fitView != nil {
		a.Fit = fitView.Cluster
	}
	a.Others = daemonSets.List
	var auditor manager.Runnable = a
	if o.leaderElect {
		// Core v1 Events, as the leader election in client-go expects its recorder.
		lock, err := audit.NewLeaseLock(mgr.GetConfig(), o.namespace, auditLease, mgr.GetEventRecorderFor("dsguard"))
		if err != nil {
			return err
		}
		auditor = &audit.Elected{Runnable: auditor, Lock: lock, Log: ctrl.Log.WithName("audit-lease"),
			LeaseDuration: o.lease.duration, RenewDeadline: o.lease.renewDeadline, RetryPeriod: o.lease.retryPeriod}
	}
	return mgr.Add(auditor)
}

// registerWebhooks puts the DaemonSet handler, the policy ConfigMap
// validator and the Node change handler on the webhook server.
func (o *serveOptions) registerWebhooks(mgr ctrl.Manager, scheme *runtime.Scheme, ref clusterview.PolicyRef,
	source *clusterview.PolicySource, nodes *clusterview.NodeView, fitView *clusterview.FitView,
	daemonSets *clusterview.DaemonSetLister, m *dswebhook.Metrics) error {
	srv := mgr.GetWebhookServer()
	dsHandler := dswebhook.NewDaemonSetHandler(scheme, source, m, o.namespace, nodes)
	if fitView != nil {
		dsHandler.Fit = fitView.Cluster
	}
	dsHandler.DaemonSets = daemonSets.List
	dsHandler.FailOpenNamespaces = o.failOpen
	dsHandler.ClientAuth = o.clientCAFile != ""
	dsHandler.PodSample = func(ctx context.Context, ds *appsv1.DaemonSet) ([]corev1.Pod, error) {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil {
			return nil, err
		}
		// One page: a sample is enough for a median, and the cost stays
		// the same on a fleet of any size.
		var pods corev1.PodList
		err = mgr.GetAPIReader().List(ctx, &pods, client.InNamespace(ds.Namespace),
			client.MatchingLabelsSelector{Selector: sel}, client.Limit(readySample))
		return pods.Items, err
	}
	reviews, err := authorizationclient.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	grants := exemptionGrants{reviews: reviews.SubjectAccessReviews(), namespace: o.namespace, clusterRole: o.granterRole}
	dsHandler.MayGrant, dsHandler.Grantors = grants.mayGrant, grants.grantors
	srv.Register(dswebhook.DaemonSetPath, dsHandler.HTTPHandler())
	srv.Register(dswebhook.PolicyConfigMapPath,
		admission.WithValidator[*corev1.ConfigMap](scheme, &dswebhook.PolicyConfigMapValidator{Ref: ref}))
	nodeChanges := o.nodeChangeHandler(mgr, scheme, source, daemonSets, m)
	// Node reviews are judged one at a time in a lane of their own, so
	// that a flood of them (any Pod can send one where client
	// authentication is off) never holds up DaemonSet reviews.
	s, ok := srv.(*dswebhook.Server)
	if !ok {
		// newManager always gives it dsguard's server; a Node entry
		// without its lane must not be served quietly.
		return fmt.Errorf("the webhook server is a %T, not dsguard's: the Node entry needs its own lane", srv)
	}
	s.RegisterLimited(dswebhook.NodePath, nodeChanges.HTTPHandler(), dswebhook.NodeLaneWidth)
	return nil
}

// readySample is how many of a DaemonSet's Pods an UPDATE that starts a
// rollout reads to estimate its length.
const readySample = 50

// nodeChangeHandler judges changes to Nodes by the DaemonSets in the
// manager's cache (the lister the DaemonSet handler and the auditor share)
// and the Pods bound to the node, listed when the API server sends a change
// that moves some DaemonSet's placement: metadata only, no Pod informer.
func (o *serveOptions) nodeChangeHandler(mgr ctrl.Manager, scheme *runtime.Scheme, source *clusterview.PolicySource,
	daemonSets *clusterview.DaemonSetLister, m *dswebhook.Metrics) *dswebhook.NodeChangeHandler {
	h := dswebhook.NewNodeChangeHandler(scheme, source, m)
	h.ClientAuth = o.clientCAFile != ""
	h.DaemonSets = daemonSets.List
	h.PodsOnNode = func(ctx context.Context, node string) ([]metav1.PartialObjectMetadata, error) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		err := mgr.GetAPIReader().List(ctx, list, client.MatchingFields{"spec.nodeName": node})
		return list.Items, err
	}
	return h
}

// parseAddresses reads addresses (one host each) and CIDRs.
func parseAddresses(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
