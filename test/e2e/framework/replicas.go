package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// Replica is one `dsguard serve` process of a Replicas set. It reaches the
// API server through its own Proxy, so a test can cut one replica off.
type Replica struct {
	*Process
	// Name tells replicas apart in logs and test output.
	Name string
	// Addr is the webhook's host:port.
	Addr string
	// API is this replica's path to the API server.
	API *Proxy

	healthPort  int
	metricsPort int
}

// Replicas are dsguard processes behind one Balancer, the way a Deployment's
// Pods sit behind the webhook configuration's Service. They share the Lease
// and one certificate directory laid out like a mounted Secret (file mode),
// which RotateServingCert replaces as cert-manager and the kubelet would.
type Replicas struct {
	// URL is the balancer's address, the webhook configuration's URL.
	URL string
	// LB is the balancer in front of the replicas.
	LB *Balancer
	// CA signs the serving certificate; its PEM is the caBundle.
	CA *TestCA
	// CertDir holds the serving certificate every replica reads.
	CertDir string

	c    *Cluster
	dir  string
	args []string

	mu      sync.Mutex
	members []*Replica
	stopped []*Replica
	seq     int
}

func (c *Cluster) startReplicas(ctx context.Context, n int, args []string) (*Replicas, error) {
	lb, err := NewBalancer()
	if err != nil {
		return nil, err
	}
	rs := &Replicas{URL: "https://" + lb.Addr, LB: lb, c: c, dir: filepath.Join(c.dir, "replicas"), args: args}
	rs.CertDir = filepath.Join(rs.dir, "serving-cert")
	if err := os.MkdirAll(rs.CertDir, 0o700); err != nil {
		lb.Close()
		return nil, err
	}
	if rs.CA, err = NewTestCA("dsguard-e2e-ca"); err == nil {
		_, err = rs.CA.WriteServingCert(rs.CertDir)
	}
	if err != nil {
		lb.Close()
		return nil, err
	}
	for range n {
		if _, err := rs.Start(ctx); err != nil {
			_ = rs.Stop()
			return nil, err
		}
	}
	return rs, nil
}

// Replicas returns the replica set Start made with Options.Replicas, or nil.
func (c *Cluster) Replicas() *Replicas { return c.replicas }

// Members returns the running replicas, oldest first.
func (rs *Replicas) Members() []*Replica {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]*Replica(nil), rs.members...)
}

// Start starts one more replica, waits until it is ready and adds it to the
// balancer.
func (rs *Replicas) Start(ctx context.Context) (*Replica, error) {
	rs.mu.Lock()
	rs.seq++
	name := fmt.Sprintf("dsguard-%d", rs.seq)
	rs.mu.Unlock()

	apiURL, err := url.Parse(rs.c.env.Config.Host)
	if err != nil {
		return nil, err
	}
	api, err := NewProxy(apiURL.Host)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := rs.kubeconfigVia(api, name)
	if err != nil {
		api.Close()
		return nil, err
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = FreePort(); err != nil {
			api.Close()
			return nil, err
		}
	}
	r := &Replica{Name: name, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), API: api,
		healthPort: ports[1], metricsPort: ports[2]}
	args := append([]string{"serve",
		"--kubeconfig", kubeconfig,
		"--namespace", Namespace,
		"--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--cert-dir", rs.CertDir,
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(ports[1]),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(ports[2]), "--metrics-secure=false",
		"--shutdown-timeout", "5s",
	}, rs.args...)
	if r.Process, err = rs.c.StartDsguard(rs.dir, args...); err != nil {
		api.Close()
		return nil, err
	}
	if err := r.WaitReady(ctx, r.healthPort, 60*time.Second); err != nil {
		r.stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rs.LB.Add(r.Addr)
	rs.mu.Lock()
	rs.members = append(rs.members, r)
	rs.mu.Unlock()
	return r, nil
}

// RotateServingCert gives every replica a new serving certificate from the
// same CA, as cert-manager renewing the Secret would; the replicas reload it
// from disk. It returns the new certificate's serial number.
func (rs *Replicas) RotateServingCert() (int64, error) { return rs.CA.WriteServingCert(rs.CertDir) }

// Replace does what a Deployment's rolling update does to one Pod: it starts
// a new replica and waits for it to be ready, takes the old one out of the
// balancer (its endpoint goes), then stops it with SIGTERM.
func (rs *Replicas) Replace(ctx context.Context, old *Replica) (*Replica, error) {
	r, err := rs.Start(ctx)
	if err != nil {
		return nil, err
	}
	rs.Remove(old)
	return r, nil
}

// Remove takes r out of the balancer and stops it gracefully.
func (rs *Replicas) Remove(r *Replica) {
	rs.LB.Remove(r.Addr)
	r.stop()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, m := range rs.members {
		if m == r {
			rs.members = append(rs.members[:i], rs.members[i+1:]...)
			break
		}
	}
	rs.stopped = append(rs.stopped, r)
}

// Stop stops every replica, the balancer and the proxies. It returns an
// error naming each replica, stopped now or earlier, that did not shut down
// cleanly (exit status 0 within 15s of SIGTERM).
func (rs *Replicas) Stop() error {
	for _, r := range rs.Members() {
		rs.Remove(r)
	}
	rs.LB.Close()
	var errs []error
	for _, r := range rs.stopped {
		if err := r.ExitError(); err != nil {
			errs = append(errs, fmt.Errorf("%s %w", r.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Logs returns every replica's log, stopped ones included, each under its name.
func (rs *Replicas) Logs() string {
	rs.mu.Lock()
	all := append(append([]*Replica(nil), rs.stopped...), rs.members...)
	rs.mu.Unlock()
	var b strings.Builder
	for _, r := range all {
		fmt.Fprintf(&b, "----- %s -----\n%s\n", r.Name, r.Log())
	}
	return b.String()
}

func (r *Replica) stop() {
	r.Process.Stop()
	r.API.Close()
}

// Pid returns the replica's process ID.
func (r *Replica) Pid() int { return r.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (r *Replica) Exited() bool {
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
}

// Ready reports whether /readyz answers 200.
func (r *Replica) Ready() bool {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", r.healthPort))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Metric returns the sum of the samples of the metric name whose labels
// contain every string of labels, from the replica's /metrics (SumMetric).
func (r *Replica) Metric(name string, labels ...string) (float64, error) {
	return ScrapeMetric(context.Background(), fmt.Sprintf("http://127.0.0.1:%d/metrics", r.metricsPort), name, labels...)
}

// kubeconfigVia writes a copy of the admin kubeconfig whose server is the proxy.
func (rs *Replicas) kubeconfigVia(p *Proxy, name string) (string, error) {
	cfg, err := clientcmd.Load(rs.c.env.KubeConfig)
	if err != nil {
		return "", err
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + p.Addr
	}
	path := filepath.Join(rs.dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}
