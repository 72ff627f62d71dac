package framework

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Namespace is where dsguard runs in the tests, as the chart's default.
const Namespace = "dsguard-system"

// Cluster is a running control plane with dsguard serving it.
type Cluster struct {
	Root       string
	Tools      string
	Kubeconfig string
	// WebhookURL is where the API server reaches dsguard.
	WebhookURL string
	// Dsguard is the path of the dsguard binary under test.
	Dsguard string
	// ClientCAFile is the CA of the client certificate the API server
	// presents to webhooks; the cluster's dsguard verifies it
	// (--client-ca-file), and so may the extra ones a test starts.
	ClientCAFile string
	// failOpen is Options.FailOpenNamespaces.
	failOpen []string

	env        *envtest.Environment
	kcm        *ControllerManager
	dir        string
	dsguard    *exec.Cmd
	dsguardLog string
	healthAddr string
	exited     chan error
	replicas   *Replicas
}

// Options tune Start.
type Options struct {
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Nodes are created before dsguard starts. With a tainted control-plane
	// node among them, Start waits until dsguard denies node-exporter.
	Nodes []Node
	// DsguardArgs are appended to `dsguard serve`'s command line.
	DsguardArgs []string
	// FailOpenNamespaces, when set, replaces the default fail-open list
	// (kube-system) in dsguard's flags and in the chart's webhook entries,
	// as an operator lists the namespaces of their CNI.
	FailOpenNamespaces []string
	// ControllerManager starts kube-controller-manager with the DaemonSet
	// and garbage-collector controllers, so DaemonSets get Pods and status.
	ControllerManager bool
	// Controllers replaces DefaultControllers for ControllerManager.
	Controllers []string
	// SelfManagedCerts starts dsguard with no certificate material: it keeps
	// its own CA and the webhook configuration's caBundle.
	SelfManagedCerts bool
	// Replicas, when above zero, starts that many dsguard processes behind a
	// balancer (see Replicas) instead of the one process; they share the
	// Lease as a Deployment's Pods do.
	Replicas int
	// StaticConfinement names ServiceAccount users for which the API server
	// loads, from its static manifests directory, the policy `dsguard vap
	// --static-confinement` prints.
	StaticConfinement []string
}

// Start builds dsguard, starts etcd and kube-apiserver, starts `dsguard
// serve` against them with a freshly generated serving certificate, and
// installs the chart's ValidatingWebhookConfiguration and policy ConfigMap
// pointed at the local process. Stop undoes all of it.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	logf := func(format string, args ...any) { fmt.Fprintf(logw, format+"\n", args...) }

	c := &Cluster{}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if c.Root, err = RepoRoot(); err != nil {
		return nil, err
	}
	if c.Tools, err = ToolsDir(c.Root); err != nil {
		return nil, err
	}
	if c.dir, err = os.MkdirTemp("", "dsguard-e2e-"); err != nil {
		return nil, err
	}
	start := time.Now()
	if c.Dsguard, err = BuildDsguard(c.Root, c.dir); err != nil {
		return nil, err
	}
	logf("built dsguard in %s", since(start))

	start = time.Now()
	c.env = &envtest.Environment{
		BinaryAssetsDirectory:    c.Tools,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	// The API server authenticates to webhooks with a client certificate,
	// as the security guide asks operators to configure it.
	var admissionConfig string
	staticDir := ""
	if len(opts.StaticConfinement) > 0 {
		if staticDir, err = staticConfinement(c.Dsguard, c.dir, opts.StaticConfinement); err != nil {
			return nil, err
		}
	}
	if c.ClientCAFile, admissionConfig, err = webhookClientAuth(c.dir, staticDir); err != nil {
		return nil, err
	}
	c.env.ControlPlane.GetAPIServer().Configure().Append("admission-control-config-file", admissionConfig)
	// A certificate directory of our own survives an API server restart
	// (KillAPIServer, StartAPIServer); envtest's temporary one would be replaced by new
	// certificates no client trusts.
	apiDir := filepath.Join(c.dir, "kube-apiserver")
	if err = os.MkdirAll(apiDir, 0o700); err != nil {
		return nil, err
	}
	c.env.ControlPlane.GetAPIServer().CertDir = apiDir
	if _, err = c.env.Start(); err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	c.Kubeconfig = filepath.Join(c.dir, "kubeconfig")
	if err = os.WriteFile(c.Kubeconfig, c.env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	logf("started etcd and kube-apiserver in %s", since(start))

	for _, ns := range []string{Namespace, "monitoring", "logging"} {
		if r := c.Kubectl(ctx, "", "create", "namespace", ns); r.Err != nil {
			return nil, r.Error()
		}
	}

	if err = c.CreateNodes(ctx, opts.Nodes); err != nil {
		return nil, err
	}
	if opts.ControllerManager {
		if c.kcm, err = StartControllerManager(ControllerManagerOptions{Tools: c.Tools, KubeConfig: c.env.KubeConfig, Dir: c.dir,
			Controllers: opts.Controllers}); err != nil {
			return nil, err
		}
		controllers := opts.Controllers
		if len(controllers) == 0 {
			controllers = DefaultControllers
		}
		logf("started kube-controller-manager (%s)", strings.Join(controllers, ", "))
	}

	// envtest generated a CA and a serving certificate for localhost.
	wio := &c.env.WebhookInstallOptions
	port := strconv.Itoa(wio.LocalServingPort)
	c.failOpen = opts.FailOpenNamespaces
	args := []string{"--client-ca-file", c.ClientCAFile}
	if len(c.failOpen) > 0 {
		args = append(args, "--fail-open-namespaces="+strings.Join(c.failOpen, ","))
	}
	args = append(args, opts.DsguardArgs...)
	if opts.SelfManagedCerts {
		// dsguard makes its own CA and fills in the caBundle of the
		// configuration, which must exist first. Its certificates carry
		// DNS names only.
		c.WebhookURL = "https://" + net.JoinHostPort("localhost", port)
		args = append([]string{"--cert-mode=self-managed", "--cert-dns-names=localhost", "--webhook-config-name=dsguard"}, args...)
		if err = c.InstallFromChart(ctx, ""); err != nil {
			return nil, err
		}
	} else {
		c.WebhookURL = "https://" + net.JoinHostPort(wio.LocalServingHost, port)
	}
	if opts.Replicas > 0 {
		if c.replicas, err = c.startReplicas(ctx, opts.Replicas, args); err != nil {
			return nil, err
		}
		c.WebhookURL = c.replicas.URL
		logf("%d dsguard replicas are ready behind %s", opts.Replicas, c.WebhookURL)
	} else {
		if err = c.startDsguard(ctx, c.Dsguard, wio.LocalServingCertDir, wio.LocalServingHost, wio.LocalServingPort, args); err != nil {
			return nil, err
		}
		logf("dsguard is ready at %s", c.WebhookURL)
	}

	if !opts.SelfManagedCerts {
		caBundle := wio.LocalServingCAData
		if c.replicas != nil {
			caBundle = c.replicas.CA.PEM
		}
		if err = c.InstallFromChart(ctx, base64.StdEncoding.EncodeToString(caBundle)); err != nil {
			return nil, err
		}
	}
	if err = c.waitForWebhook(ctx); err != nil {
		return nil, err
	}
	logf("webhook configuration from charts/dsguard installed and answering")
	return c, nil
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

func (c *Cluster) startDsguard(ctx context.Context, bin, certDir, host string, port int, extra []string) error {
	hp, err := FreePort()
	if err != nil {
		return err
	}
	c.healthAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(hp))
	c.dsguardLog = filepath.Join(c.dir, "dsguard.log")
	logFile, err := os.Create(c.dsguardLog)
	if err != nil {
		return err
	}
	c.dsguard = exec.Command(bin, "serve",
		"--kubeconfig", c.Kubeconfig,
		"--namespace", Namespace,
		"--host", host, "--port", strconv.Itoa(port), "--cert-dir", certDir,
		"--health-probe-bind-address", c.healthAddr,
		"--metrics-bind-address", "0",
		"--shutdown-timeout", "5s",
	)
	c.dsguard.Args = append(c.dsguard.Args, extra...)
	c.dsguard.Stdout, c.dsguard.Stderr = logFile, logFile
	// If the test process dies, dsguard dies with it.
	c.dsguard.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.dsguard.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting dsguard: %w", err)
	}
	c.exited = make(chan error, 1)
	go func() { c.exited <- c.dsguard.Wait(); logFile.Close() }()

	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-c.exited:
			c.exited <- err
			return fmt.Errorf("dsguard exited early (%v):\n%s", err, c.DsguardLog())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get("http://" + c.healthAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("dsguard not ready after 60s:\n%s", c.DsguardLog())
}

// HealthAddr is the host:port of the cluster's dsguard's /healthz and
// /readyz.
func (c *Cluster) HealthAddr() string { return c.healthAddr }

// DsguardPID returns the process ID of the cluster's dsguard, 0 before it starts.
func (c *Cluster) DsguardPID() int {
	if c.dsguard == nil || c.dsguard.Process == nil {
		return 0
	}
	return c.dsguard.Process.Pid
}

// Config returns an admin REST config for the control plane.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.env.Config) }

// RunDsguard runs the dsguard binary under test (e.g. `audit`) against the
// cluster and returns its output and exit status.
func (c *Cluster) RunDsguard(ctx context.Context, args ...string) Result {
	return run(ctx, "", c.Dsguard, c.Root, append(args, "--kubeconfig", c.Kubeconfig)...)
}

// ControllerManagerLog returns what kube-controller-manager has logged, "" when not started.
func (c *Cluster) ControllerManagerLog() string {
	if c.kcm == nil {
		return ""
	}
	return c.kcm.Log()
}

// DsguardLog returns what dsguard has logged so far (every replica's log
// with Options.Replicas).
func (c *Cluster) DsguardLog() string {
	if c.replicas != nil {
		return c.replicas.Logs()
	}
	data, _ := os.ReadFile(c.dsguardLog)
	return string(data)
}

// Helm runs the built helm binary.
func (c *Cluster) Helm(ctx context.Context, args ...string) Result {
	return run(ctx, "", filepath.Join(c.Tools, "helm"), c.Root, args...)
}

// InstallFromChart renders the chart's ValidatingWebhookConfiguration and
// policy ConfigMap, pointed at the local dsguard, and applies them with kubectl.
func (c *Cluster) InstallFromChart(ctx context.Context, caBundle string) error {
	args := []string{"template", "dsguard", "charts/dsguard", "--namespace", Namespace,
		"--set", "webhook.url=" + c.WebhookURL, "--set", "webhook.caBundle=" + caBundle,
		"--show-only", "templates/validatingwebhookconfiguration.yaml",
		"--show-only", "templates/policy-configmap.yaml"}
	if len(c.failOpen) > 0 {
		args = append(args, "--set", "webhook.failOpenNamespaces={"+strings.Join(c.failOpen, ",")+"}")
	}
	r := c.Helm(ctx, args...)
	if r.Err != nil {
		return r.Error()
	}
	if a := c.Kubectl(ctx, r.Stdout, "apply", "-f", "-"); a.Err != nil {
		return a.Error()
	}
	return nil
}

// waitForWebhook waits until the API server calls dsguard: a dry-run of
// node-exporter without tolerations comes back with dsguard's verdict (a
// deny when a control-plane node exists, else a warning).
func (c *Cluster) waitForWebhook(ctx context.Context) error {
	manifest, err := os.ReadFile(filepath.Join(c.Root, "examples", "node-exporter.yaml"))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	var last Result
	for time.Now().Before(deadline) {
		last = c.Kubectl(ctx, string(manifest), "apply", "--dry-run=server", "-f", "-")
		if strings.Contains(last.Stderr, "control-plane-toleration") {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("the API server does not call dsguard after 30s; last kubectl output: %s %s\ndsguard log:\n%s",
		last.Stdout, last.Stderr, c.DsguardLog())
}

// Stop stops dsguard with SIGTERM, then the control plane, and removes the
// temporary files. It returns an error when dsguard did not shut down
// cleanly (exit status 0 within 15s). It is safe to call more than once.
func (c *Cluster) Stop() error {
	var err error
	if c.dsguard != nil && c.dsguard.Process != nil {
		_ = c.dsguard.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-c.exited:
			if err != nil {
				err = fmt.Errorf("dsguard exited with %v after SIGTERM%s", err, raceReports(c.DsguardLog()))
			}
		case <-time.After(15 * time.Second):
			_ = c.dsguard.Process.Kill()
			<-c.exited
			err = errors.New("dsguard did not stop within 15s of SIGTERM")
		}
		c.dsguard = nil
	}
	if c.replicas != nil {
		if rerr := c.replicas.Stop(); rerr != nil && err == nil {
			err = fmt.Errorf("dsguard replicas: %w", rerr)
		}
		c.replicas = nil
	}
	if c.kcm != nil {
		c.kcm.Stop()
		c.kcm = nil
	}
	if c.env != nil {
		_ = c.env.Stop()
		c.env = nil
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
		c.dir = ""
	}
	return err
}

// raceReports returns the race detector's reports in a log (see RaceEnv),
// to go with the exit status they caused, or "" when there are none.
func raceReports(log string) string {
	i := strings.Index(log, "WARNING: DATA RACE")
	if i < 0 {
		return ""
	}
	return ": the race detector found data races:\n" + log[i:]
}

// Result is the outcome of one command.
type Result struct {
	Command  string
	Stdout   string
	Stderr   string
	ExitCode int
	Err      error
}

// Error describes a failed command with its output.
func (r Result) Error() error {
	if r.Err == nil {
		return nil
	}
	return fmt.Errorf("%s: %v\nstdout: %s\nstderr: %s", r.Command, r.Err, r.Stdout, r.Stderr)
}

// Kubectl runs the built kubectl (never the machine's) with the cluster's
// kubeconfig; stdin may be empty.
func (c *Cluster) Kubectl(ctx context.Context, stdin string, args ...string) Result {
	return run(ctx, stdin, filepath.Join(c.Tools, "kubectl"), c.Root,
		append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
}

func run(ctx context.Context, stdin, bin, dir string, args ...string) Result {
	return Run(ctx, dir, stdin, nil, bin, args...)
}

// Run runs bin in dir with extra environment variables env, feeding it stdin
// (when not empty), and returns its output and exit status. The child dies
// with the test process.
func Run(ctx context.Context, dir, stdin string, env []string, bin string, args ...string) Result {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Command: filepath.Base(bin) + " " + strings.Join(args, " "), Stdout: out.String(), Stderr: errb.String(), Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.ExitCode = ee.ExitCode()
	} else if err != nil {
		r.ExitCode = -1
	}
	return r
}
