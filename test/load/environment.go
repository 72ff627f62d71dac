package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// Namespaces of the harness. A namespace's label webhookLabel routes its
// DaemonSets to one webhook (or none), and the generated
// ValidatingAdmissionPolicies judge only nsVAP and nsVAPWebhook, so that
// every mode shares one API server and one run.
const (
	ownNamespace = "dsguard-system"
	webhookLabel = "load.dsguard.io/webhook"
	nsNone       = "load-none"
	nsNoop       = "load-noop"
	nsDsguard    = "load-dsguard"
	nsVAP        = "load-vap"
	nsVAPWebhook = "load-vap-webhook"
	nsChurn      = "load-churn"
	nsProbe      = "load-probe"
	daemonSetURL = "/validate-daemonset"
)

// The webhooks' names in the ValidatingWebhookConfigurations, and the values
// of webhookLabel that route to them.
const (
	hookNoop       = "noop"
	hookDsguard    = "dsguard"
	hookVAPWebhook = "dsguard-vap"
)

// environment is the running control plane, fleet and webhooks.
type environment struct {
	dir     string
	root    string
	tools   string
	env     *envtest.Environment
	kube    *kubernetes.Clientset
	fleet   *fleet
	dsguard *process
	noop    *process
	// nodeWatcher watches the Nodes and keeps nothing: the CPU phases'
	// floor.
	nodeWatcher *process
	// vapWebhook is `dsguard serve --mode vap+webhook`, started for the
	// create phase only (see startVAPWebhook).
	vapWebhook *process
	// dsguardURL and noopURL are the webhooks' DaemonSet endpoints;
	// tlsConfig trusts their serving certificate.
	dsguardURL, noopURL string
	// dsguardPprof and noopPprof are the profiling endpoints' base URLs,
	// set with -profile only.
	dsguardPprof, noopPprof string
	// metricsURL is dsguard's metrics endpoint, scraped with metricsToken
	// through metricsClient.
	metricsURL, metricsToken string
	metricsClient            *http.Client
	// recordedReview is the file the no-op webhook writes the review of
	// the DaemonSet named recordName into.
	recordedReview string
	tlsConfig      *tls.Config
	setup          setupFigures
	// What startVAPWebhook needs besides.
	bin, kubeconfig, host, certDir string
	caBundle                       []byte
	// noopBin is the harness's own executable, copied: the floors run it.
	noopBin string
}

// setupFigures describe how the fleet was built.
type setupFigures struct {
	nodes, classes   int
	createNodes      time.Duration
	nodesPerSecond   float64
	daemonSets       int
	dsguardReady     time.Duration
	rssReady         int64
	rssSettled       int64
	memoryReady      memoryPoint
	apiserverVersion string
}

func startEnvironment(ctx context.Context, o options) (_ *environment, err error) {
	e := &environment{}
	defer func() {
		if err != nil {
			_ = e.stop()
		}
	}()
	if e.root, err = framework.RepoRoot(); err != nil {
		return nil, err
	}
	tools, err := framework.ToolsDir(e.root)
	if err != nil {
		return nil, err
	}
	e.tools = tools
	if e.dir, err = os.MkdirTemp("", "dsguard-load-"); err != nil {
		return nil, err
	}
	bin := o.dsguardBin
	if bin == "" {
		// The container image's build: what a cluster runs.
		logf("building dsguard as the container image carries it (-tags %s)", framework.ImageBuildTags)
		if bin, err = framework.BuildImageDsguard(e.root, e.dir); err != nil {
			return nil, err
		}
	}

	logf("starting etcd and kube-apiserver")
	e.env = &envtest.Environment{
		BinaryAssetsDirectory:    tools,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	api := e.env.ControlPlane.GetAPIServer().Configure()
	// Nodes are created ready: the TaintNodesByCondition admission plugin
	// would put node.kubernetes.io/not-ready on each, and with no kubelet
	// and no node lifecycle controller nothing would lift it.
	api.Append("disable-admission-plugins", "TaintNodesByCondition")
	// Room for 500 Node updates per second beside the measured creates.
	api.Set("max-requests-inflight", "2000")
	api.Set("max-mutating-requests-inflight", "1000")
	cfg, err := e.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 5000, 10000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	// client-go's default handler logs every warning a response carries,
	// synchronously, inside the timed create: the measured DaemonSet gets
	// dsguard's node-coverage warning and the no-op's answer has none, so
	// the harness's own logging would count as dsguard's overhead. The API
	// server still sends the warnings; the verdict polls read theirs with a
	// handler of their own.
	cfg.WarningHandler = rest.NoWarnings{}
	if e.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if v, err := e.kube.Discovery().ServerVersion(); err == nil {
		e.setup.apiserverVersion = v.GitVersion
	}
	kubeconfig := filepath.Join(e.dir, "kubeconfig")
	if err = os.WriteFile(kubeconfig, e.env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	if err = e.createNamespaces(ctx); err != nil {
		return nil, err
	}

	e.fleet = newFleet(o.nodes, o.probes)
	logf("creating %d Nodes", len(e.fleet.nodes))
	start := time.Now()
	if err = e.fleet.create(ctx, e.kube); err != nil {
		return nil, err
	}
	e.setup.createNodes = time.Since(start)
	e.setup.nodes = len(e.fleet.nodes)
	e.setup.classes = e.fleet.classes
	e.setup.nodesPerSecond = float64(len(e.fleet.nodes)) / e.setup.createNodes.Seconds()
	logf("created %d Nodes in %s (%.0f/s)", len(e.fleet.nodes), e.setup.createNodes.Round(time.Second), e.setup.nodesPerSecond)
	if err = e.createBackgroundDaemonSets(ctx, o.daemonSets); err != nil {
		return nil, err
	}
	e.setup.daemonSets = o.daemonSets

	// envtest generated a CA and a serving certificate for 127.0.0.1 and
	// localhost; both webhooks serve it.
	wio := &e.env.WebhookInstallOptions
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(wio.LocalServingCAData)
	e.tlsConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	host := wio.LocalServingHost
	e.bin, e.kubeconfig, e.host, e.certDir, e.caBundle = bin, kubeconfig, host, wio.LocalServingCertDir, wio.LocalServingCAData

	logf("starting dsguard serve")
	healthPort, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	start = time.Now()
	var env []string
	if o.memoryLimit > 0 {
		env = append(env, fmt.Sprintf("DSGUARD_MEMORY_LIMIT=%d", o.memoryLimit))
	}
	args := []string{"serve",
		"--kubeconfig", kubeconfig, "--namespace", ownNamespace,
		"--host", host, "--port", strconv.Itoa(wio.LocalServingPort), "--cert-dir", wio.LocalServingCertDir,
		"--health-probe-bind-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(healthPort)),
		"--shutdown-timeout", "5s"}
	metricsArgs, err := e.secureMetrics(ctx)
	if err != nil {
		return nil, err
	}
	args = append(args, metricsArgs...)
	// The profiling endpoints only with -profile: the chart leaves them off.
	var noopArgs []string
	if o.profile != "" {
		dsguardPprof, noopPprof, err := pprofAddresses()
		if err != nil {
			return nil, err
		}
		args = append(args, "--pprof-bind-address", dsguardPprof)
		e.dsguardPprof = "http://" + dsguardPprof
		noopArgs = append(noopArgs, "--pprof", noopPprof)
		e.noopPprof = "http://" + noopPprof
	}
	if err = dropFromPageCache(bin); err != nil {
		return nil, err
	}
	e.dsguard, err = startProcess(e.dir, "dsguard", env, bin, args...)
	if err != nil {
		return nil, err
	}
	if err = e.dsguard.waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort), nil, 5*time.Minute); err != nil {
		return nil, err
	}
	e.setup.dsguardReady = time.Since(start)
	e.setup.rssReady, _ = e.dsguard.rss()
	e.setup.memoryReady = e.memoryNow("ready", o.profile)
	e.dsguardURL = "https://" + net.JoinHostPort(host, strconv.Itoa(wio.LocalServingPort)) + daemonSetURL
	logf("dsguard ready in %s, RSS %s", e.setup.dsguardReady.Round(100*time.Millisecond), mib(e.setup.rssReady))

	noopPort, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// The no-op runs from a copy of the harness's executable, read from
	// disk as dsguard's is. Started from the harness's own file it would
	// share the physical pages of the code the harness runs as the load
	// generator (the runtime, net/http, crypto/tls, encoding/json): at 1
	// concurrent request, where client and server take turns, it would
	// find that code in the CPU caches the client had just warmed, which
	// no webhook in a cluster does (the API server is a binary of its own).
	noopBin := filepath.Join(e.dir, "noop-webhook")
	e.noopBin = noopBin
	if err = copyFile(self, noopBin); err != nil {
		return nil, err
	}
	if err = dropFromPageCache(noopBin); err != nil {
		return nil, err
	}
	e.recordedReview = filepath.Join(e.dir, "recorded-review.json")
	e.noop, err = startProcess(e.dir, "noop-webhook", nil, noopBin, append([]string{noopCommand,
		"--host", host, "--port", strconv.Itoa(noopPort), "--cert-dir", wio.LocalServingCertDir,
		"--record", e.recordedReview}, noopArgs...)...)
	if err != nil {
		return nil, err
	}
	if e.nodeWatcher, err = startProcess(e.dir, nodeWatcherCommand, nil, noopBin, nodeWatcherCommand,
		"--kubeconfig", kubeconfig); err != nil {
		return nil, err
	}
	e.noopURL = "https://" + net.JoinHostPort(host, strconv.Itoa(noopPort)) + daemonSetURL
	if err = e.noop.waitHTTP(ctx, strings.TrimSuffix(e.noopURL, daemonSetURL)+noopReadyPath, e.tlsConfig, time.Minute); err != nil {
		return nil, err
	}
	if err = e.installWebhooks(ctx, map[string]string{hookNoop: e.noopURL, hookDsguard: e.dsguardURL}); err != nil {
		return nil, err
	}
	// The no-op webhook warns for the DaemonSet named pingName only;
	// dsguard warns for any DaemonSet without a readiness probe.
	if err = waitWarning(ctx, e.kube, nsNoop, noopWarning); err != nil {
		return nil, err
	}
	if err = waitWarning(ctx, e.kube, nsDsguard, "readiness-probe"); err != nil {
		return nil, err
	}
	logf("webhooks installed and answering")
	return e, nil
}

// pprofAddresses returns two free loopback addresses for the webhooks'
// profiling endpoints.
func pprofAddresses() (dsguard, noop string, err error) {
	var ports [2]int
	for i := range ports {
		if ports[i], err = framework.FreePort(); err != nil {
			return "", "", err
		}
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])), nil
}

func (e *environment) createNamespaces(ctx context.Context) error {
	namespaces := map[string]string{ownNamespace: "", nsNone: "", nsNoop: hookNoop, nsDsguard: hookDsguard,
		nsVAP: "", nsVAPWebhook: hookVAPWebhook, nsChurn: hookDsguard, nsProbe: hookDsguard}
	for i := range backgroundNamespaces {
		namespaces[backgroundNamespace(i)] = hookDsguard
	}
	for name, hook := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if hook != "" {
			ns.Labels = map[string]string{webhookLabel: hook}
		}
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
}

// backgroundNamespaces hold the DaemonSets the auditor watches during the
// CPU phases, spread as teams spread them.
const backgroundNamespaces = 10

func backgroundNamespace(i int) string { return fmt.Sprintf("load-team-%02d", i%backgroundNamespaces) }

func (e *environment) createBackgroundDaemonSets(ctx context.Context, n int) error {
	return parallel(ctx, n, 16, func(ctx context.Context, i int) error {
		ds := daemonSet(fmt.Sprintf("agent-%03d", i))
		if i%4 == 1 {
			// Some select one pool, some tolerate everything: the
			// auditor's work differs per DaemonSet.
			ds.Spec.Template.Spec.NodeSelector = map[string]string{poolLabel: pools[i%len(pools)].name}
		}
		if i%4 == 2 {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		_, err := e.kube.AppsV1().DaemonSets(backgroundNamespace(i)).Create(ctx, ds, metav1.CreateOptions{})
		return err
	})
}

// installWebhooks points one ValidatingWebhookConfiguration at each webhook
// (by the name its namespaces carry in webhookLabel), each matching
// DaemonSets in the namespaces labelled for it.
func (e *environment) installWebhooks(ctx context.Context, urls map[string]string) error {
	for name, url := range urls {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "load-" + name},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:                    name + ".load.dsguard.io",
				AdmissionReviewVersions: []string{"v1"},
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				TimeoutSeconds:          ptr.To[int32](10),
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url), CABundle: e.caBundle},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
						Resources: []string{"daemonsets"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
				}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{webhookLabel: name}},
			}},
		}
		if _, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// waitWarning dry-runs a DaemonSet without a readiness probe, named
// pingName, in namespace ns until a warning contains want: then whatever
// gives that warning (a webhook, a policy) is in force.
func waitWarning(ctx context.Context, kube *kubernetes.Clientset, ns, want string) error {
	return retryMinute(ctx, func() error {
		ds := daemonSet(pingName)
		ds.Spec.Template.Spec.Containers[0].ReadinessProbe = nil
		warnings, err := dryRunCreate(ctx, kube, ns, ds)
		if err == nil && !strings.Contains(strings.Join(warnings, "\n"), want) {
			err = fmt.Errorf("no warning with %q among %q", want, warnings)
		}
		return err
	})
}

// retryMinute calls try until it succeeds, for a minute at most.
func retryMinute(ctx context.Context, try func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := try()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still failing after a minute: %w", err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// startVAPWebhook starts `dsguard serve --mode vap+webhook` beside the
// webhook-mode dsguard, as a second replica would run: it shares the
// auditor's Lease (so the first one keeps auditing alone), applies the
// generated ValidatingAdmissionPolicies, made to judge nsVAP and
// nsVAPWebhook only, and serves the node-aware rules to nsVAPWebhook. The
// policies are those `dsguard serve --mode vap` applies (the mode changes
// only what the webhook judges), so nsVAP measures vap mode. It waits until
// the API server enforces both and returns a function that stops the
// process and deletes the policies.
func (e *environment) startVAPWebhook(ctx context.Context) (stop func(context.Context) error, err error) {
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = framework.FreePort(); err != nil {
			return nil, err
		}
	}
	excluded := []string{nsNone, nsNoop, nsDsguard, nsChurn, nsProbe}
	for i := range backgroundNamespaces {
		excluded = append(excluded, backgroundNamespace(i))
	}
	p, err := startProcess(e.dir, "dsguard-vap-webhook", nil, e.bin, "serve", "--mode", "vap+webhook",
		"--excluded-namespaces", strings.Join(excluded, ","),
		"--kubeconfig", e.kubeconfig, "--namespace", ownNamespace,
		"--host", e.host, "--port", strconv.Itoa(ports[0]), "--cert-dir", e.certDir,
		"--health-probe-bind-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		"--metrics-bind-address", "0", "--shutdown-timeout", "5s")
	if err != nil {
		return nil, err
	}
	e.vapWebhook = p
	cleanup := func(ctx context.Context) error {
		e.vapWebhook = nil
		errs := []error{p.stop(),
			e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "load-"+hookVAPWebhook, metav1.DeleteOptions{})}
		if apierrors.IsNotFound(errs[1]) {
			errs[1] = nil // stopped before the webhook was installed
		}
		sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=dsguard"}
		errs = append(errs,
			e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().DeleteCollection(ctx, metav1.DeleteOptions{}, sel),
			e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			_ = cleanup(context.WithoutCancel(ctx))
		}
	}()
	if err = p.waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1]), nil, 5*time.Minute); err != nil {
		return nil, err
	}
	url := "https://" + net.JoinHostPort(e.host, strconv.Itoa(ports[0])) + daemonSetURL
	if err = e.installWebhooks(ctx, map[string]string{hookVAPWebhook: url}); err != nil {
		return nil, err
	}
	// The readiness-probe warning comes from a generated policy in both
	// namespaces (the vap+webhook webhook leaves that rule to it).
	for _, ns := range []string{nsVAP, nsVAPWebhook} {
		if err = waitWarning(ctx, e.kube, ns, "readiness-probe"); err != nil {
			return nil, fmt.Errorf("the generated policies do not judge namespace %s: %w", ns, err)
		}
	}
	// A DaemonSet that selects a tainted pool without tolerating its taint
	// runs nowhere: node-coverage, which only the webhook judges, denies it.
	err = retryMinute(ctx, func() error {
		ds := daemonSet(pingName)
		ds.Spec.Template.Spec.NodeSelector = map[string]string{poolLabel: "gpu"}
		_, err := dryRunCreate(ctx, e.kube, nsVAPWebhook, ds)
		if err == nil || !strings.Contains(err.Error(), hookVAPWebhook+".load.dsguard.io") {
			return fmt.Errorf("no deny from the vap+webhook webhook for a DaemonSet that runs on no node: %v", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cleanup, nil
}

func (e *environment) stop() error {
	var errs []error
	for _, p := range []*process{e.dsguard, e.noop, e.nodeWatcher, e.vapWebhook} {
		if p != nil {
			if err := p.stop(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
		}
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
	return errors.Join(errs...)
}

// pingName is the DaemonSet the harness dry-runs to see a webhook answer.
const pingName = "load-ping"

// daemonSet is a node agent like the ones the harness creates: Linux only,
// tolerating the control plane, with a readiness probe and no other finding
// under the default policy except what the nodes make of it.
func daemonSet(name string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
					// As a node agent asks: a priority that may preempt, and
					// requests the webhook weighs on every node it covers.
					PriorityClassName: "system-node-critical",
					Tolerations: []corev1.Toleration{{Key: controlPlaneTaint, Operator: corev1.TolerationOpExists,
						Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name:  "agent",
						Image: "registry.example.com/agent:1.2.3",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstrPort(8080)},
						}},
					}},
				},
			},
		},
	}
}

// dryRunCreate creates ds in namespace ns with dryRun=All and returns the
// warnings of the response.
func dryRunCreate(ctx context.Context, kube *kubernetes.Clientset, ns string, ds *appsv1.DaemonSet) ([]string, error) {
	var warnings warningCollector
	cfg := kube.AppsV1().RESTClient()
	result := cfg.Post().Namespace(ns).Resource("daemonsets").Param("dryRun", "All").
		Body(ds).WarningHandler(&warnings).Do(ctx)
	return warnings.list, result.Error()
}

type warningCollector struct{ list []string }

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.list = append(w.list, text)
}

// isDenied reports an admission deny (HTTP 403 from a webhook).
func isDenied(err error) bool { return apierrors.IsForbidden(err) }

// httpClient returns a client for direct TLS requests to the webhooks, with
// room for conns keep-alive connections and HTTP/1.1 as the API server uses.
func (e *environment) httpClient(conns int) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: e.tlsConfig.Clone(), MaxIdleConns: conns, MaxIdleConnsPerHost: conns,
		MaxConnsPerHost: conns, ForceAttemptHTTP2: false, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}}
}
