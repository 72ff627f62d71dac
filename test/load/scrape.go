package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// scraperName names the ServiceAccount, ClusterRole and binding the harness
// scrapes dsguard's metrics as, as Prometheus would.
const scraperName = "load-metrics-scraper"

// secureMetrics makes dsguard serve its metrics as the chart does: HTTPS with
// Kubernetes authentication and authorization, scraped with a ServiceAccount
// token that is granted `get` on /metrics. The memory figures read the Go
// heap there: reading it from the profiling endpoint would symbolise every
// sampled allocation stack, mapping into dsguard pages of its executable that
// nothing in production touches. It returns dsguard's flags.
func (e *environment) secureMetrics(ctx context.Context) ([]string, error) {
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: scraperName, Namespace: ownNamespace}}
	if _, err := e.kube.CoreV1().ServiceAccounts(ownNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the scraper's ServiceAccount: %w", err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: scraperName},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := e.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the scraper's ClusterRole: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: scraperName},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: scraperName},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraperName, Namespace: ownNamespace}}}
	if _, err := e.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the scraper's ClusterRoleBinding: %w", err)
	}
	hours := int64(24 * 3600)
	token, err := e.kube.CoreV1().ServiceAccounts(ownNamespace).CreateToken(ctx, scraperName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hours}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting the scraper's token: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	e.metricsURL, e.metricsToken = "https://"+addr+"/metrics", token.Status.Token
	// One client for every scrape: its connection is kept alive between
	// them, as Prometheus keeps it, instead of each scrape leaving one open.
	e.metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: e.tlsConfig}}
	return []string{"--metrics-bind-address", addr, "--metrics-secure=true"}, nil
}

// readHeapStats scrapes dsguard's metrics as the harness's ServiceAccount and
// returns the Go runtime's heap figures (the Go collector's go_memstats_*).
func (e *environment) readHeapStats() (heapStats, error) {
	var h heapStats
	if e.metricsURL == "" {
		return h, fmt.Errorf("no metrics endpoint")
	}
	req, err := http.NewRequest(http.MethodGet, e.metricsURL, nil)
	if err != nil {
		return h, err
	}
	req.Header.Set("Authorization", "Bearer "+e.metricsToken)
	resp, err := e.metricsClient.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("scraping %s: HTTP %d", e.metricsURL, resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return h, err
	}
	get := func(name string) int64 {
		v, metricErr := framework.SumMetric(body, "go_memstats_"+name+"_bytes")
		err = errors.Join(err, metricErr)
		return int64(v)
	}
	h = heapStats{alloc: get("heap_alloc"), inuse: get("heap_inuse"),
		fromOS: get("heap_sys") - get("heap_released"), nextGC: get("next_gc")}
	return h, err
}

// copyFile copies the executable src to dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}

// dropFromPageCache writes path's dirty pages and drops its pages from the
// page cache, so that a process started from it reads its executable from
// disk, as after a node's restart or under memory pressure. Otherwise its
// RSS depends on how the file was last written: on kernels that keep large
// folios for the file and map a whole folio on a fault (Linux 6.18 does), a
// freshly built binary maps megabytes around every page it touches. Pages
// that a running process maps stay.
func dropFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("dropping %s from the page cache: %w", path, err)
	}
	return nil
}
