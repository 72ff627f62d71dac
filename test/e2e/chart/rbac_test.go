package chart

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/dsguard/dsguard/audit"
	"github.com/dsguard/dsguard/test/e2e/framework"
)

const (
	// rbacNamespace holds a second release, whose ServiceAccount a dsguard
	// started here runs as (impersonated), alone in its namespace so that it
	// wins the leader election.
	rbacNamespace = "dsguard-rbac"
	rbacRelease   = "rbac"
	rbacFullname  = "rbac-dsguard"
)

// canI is one row of the `kubectl auth can-i` matrix.
type canI struct {
	verb, resource string
	namespace      string // "" for cluster-scoped, "-A" for all namespaces
	extra          []string
	want           bool
}

// rbacMatrix is what dsguard serve needs (want true) and a selection of what
// it must not be able to do (want false).
var rbacMatrix = []canI{
	// The node view and the coverage watcher: read nodes and DaemonSets everywhere.
	{verb: "get", resource: "nodes", want: true},
	{verb: "list", resource: "nodes", want: true},
	{verb: "watch", resource: "nodes", want: true},
	{verb: "get", resource: "daemonsets.apps", namespace: "monitoring", want: true},
	{verb: "list", resource: "daemonsets.apps", namespace: "-A", want: true},
	{verb: "watch", resource: "daemonsets.apps", namespace: "-A", want: true},
	// Events about a DaemonSet go to its namespace (events.k8s.io/v1).
	{verb: "create", resource: "events.events.k8s.io", namespace: "monitoring", want: true},
	{verb: "patch", resource: "events.events.k8s.io", namespace: "monitoring", want: true},
	// The policy ConfigMap in its own namespace.
	{verb: "list", resource: "configmaps/dsguard-policy", namespace: rbacNamespace, want: true},
	{verb: "watch", resource: "configmaps/dsguard-policy", namespace: rbacNamespace, want: true},
	{verb: "get", resource: "configmaps/dsguard-policy", namespace: rbacNamespace, want: true},
	// The record of the last good policy: read and updated by name only.
	{verb: "get", resource: "configmaps/dsguard-policy-last-good", namespace: rbacNamespace, want: true},
	{verb: "update", resource: "configmaps/dsguard-policy-last-good", namespace: rbacNamespace, want: true},
	// Leader election: its one Lease, and the core Events it records.
	{verb: "create", resource: "leases.coordination.k8s.io", namespace: rbacNamespace, want: true},
	{verb: "get", resource: "leases.coordination.k8s.io/dsguard-coverage", namespace: rbacNamespace, want: true},
	{verb: "update", resource: "leases.coordination.k8s.io/dsguard-coverage", namespace: rbacNamespace, want: true},
	{verb: "create", resource: "events", namespace: rbacNamespace, want: true},
	{verb: "patch", resource: "events", namespace: rbacNamespace, want: true},
	// The auditor's on-demand Pod listing and its OpenReports Reports.
	{verb: "list", resource: "pods", namespace: "monitoring", want: true},
	// The fit view (fit.enabled, on by default): Pods, namespaces and
	// PriorityClasses listed and watched, read only.
	{verb: "watch", resource: "pods", namespace: "-A", want: true},
	{verb: "watch", resource: "namespaces", want: true},
	{verb: "list", resource: "priorityclasses.scheduling.k8s.io", want: true},
	{verb: "watch", resource: "priorityclasses.scheduling.k8s.io", want: true},
	{verb: "create", resource: "reports.openreports.io", namespace: "monitoring", want: true},
	{verb: "get", resource: "reports.openreports.io/" + audit.ReportName, namespace: "monitoring", want: true},
	{verb: "update", resource: "reports.openreports.io/" + audit.ReportName, namespace: "monitoring", want: true},
	{verb: "delete", resource: "reports.openreports.io/" + audit.ReportName, namespace: "monitoring", want: true},
	// The secure metrics filter.
	{verb: "create", resource: "tokenreviews.authentication.k8s.io", want: true},
	{verb: "create", resource: "subjectaccessreviews.authorization.k8s.io", want: true},

	// Nothing more: no Secrets anywhere,
	{verb: "list", resource: "secrets", namespace: "-A"},
	{verb: "get", resource: "secrets", namespace: rbacNamespace},
	{verb: "list", resource: "secrets", namespace: rbacNamespace},
	{verb: "watch", resource: "secrets", namespace: rbacNamespace},
	// no other Report read, replaced or removed, nor any listed,
	{verb: "get", resource: "reports.openreports.io/someone-elses", namespace: "monitoring"},
	{verb: "update", resource: "reports.openreports.io/someone-elses", namespace: "monitoring"},
	{verb: "delete", resource: "reports.openreports.io/someone-elses", namespace: "monitoring"},
	{verb: "list", resource: "reports.openreports.io", namespace: "-A"},
	// no writes to DaemonSets (nor their status),
	{verb: "create", resource: "daemonsets.apps", namespace: "monitoring"},
	{verb: "update", resource: "daemonsets.apps", namespace: "monitoring"},
	{verb: "patch", resource: "daemonsets.apps", namespace: "monitoring"},
	{verb: "delete", resource: "daemonsets.apps", namespace: "monitoring"},
	{verb: "patch", resource: "daemonsets.apps", namespace: "monitoring", extra: []string{"--subresource=status"}},
	// no ConfigMaps elsewhere, no other ConfigMap by name, no policy updates or deletes,
	{verb: "get", resource: "configmaps", namespace: "kube-system"},
	{verb: "list", resource: "configmaps", namespace: "default"},
	{verb: "list", resource: "configmaps", namespace: "-A"},
	{verb: "list", resource: "configmaps", namespace: rbacNamespace},
	{verb: "watch", resource: "configmaps", namespace: rbacNamespace},
	{verb: "get", resource: "configmaps/kube-root-ca.crt", namespace: rbacNamespace},
	{verb: "create", resource: "configmaps", namespace: rbacNamespace},
	{verb: "update", resource: "configmaps/dsguard-policy", namespace: rbacNamespace},
	{verb: "patch", resource: "configmaps/dsguard-policy", namespace: rbacNamespace},
	{verb: "delete", resource: "configmaps/dsguard-policy", namespace: rbacNamespace},
	{verb: "delete", resource: "configmaps/dsguard-policy-last-good", namespace: rbacNamespace},
	// no other Lease, no Lease elsewhere, no deleting its own,
	{verb: "update", resource: "leases.coordination.k8s.io/kube-controller-manager", namespace: rbacNamespace},
	{verb: "delete", resource: "leases.coordination.k8s.io/dsguard-coverage", namespace: rbacNamespace},
	{verb: "get", resource: "leases.coordination.k8s.io", namespace: "kube-system"},
	{verb: "create", resource: "leases.coordination.k8s.io", namespace: "default"},
	// core Events only in its own namespace; no deleting Events,
	{verb: "create", resource: "events", namespace: "monitoring"},
	{verb: "delete", resource: "events.events.k8s.io", namespace: "monitoring"},
	// no reads of single Pods or Pod writes, no PriorityClass or
	// namespace writes, no node writes, no webhook or RBAC changes, no
	// escalation.
	{verb: "create", resource: "priorityclasses.scheduling.k8s.io"},
	{verb: "patch", resource: "namespaces/monitoring"},
	{verb: "get", resource: "pods", namespace: "monitoring"},
	{verb: "create", resource: "pods", namespace: rbacNamespace},
	{verb: "delete", resource: "pods", namespace: "monitoring"},
	{verb: "patch", resource: "nodes"},
	{verb: "delete", resource: "nodes"},
	{verb: "update", resource: "validatingwebhookconfigurations.admissionregistration.k8s.io"},
	{verb: "create", resource: "clusterrolebindings.rbac.authorization.k8s.io"},
	{verb: "create", resource: "rolebindings.rbac.authorization.k8s.io", namespace: rbacNamespace},
	{verb: "impersonate", resource: "users"},
	{verb: "create", resource: "serviceaccounts", namespace: rbacNamespace, extra: []string{"--subresource=token"}},
	{verb: "*", resource: "*", namespace: "-A"},
}

// saUser and saGroups are the identity a Pod of the release would have.
var (
	saUser   = "system:serviceaccount:" + rbacNamespace + ":" + rbacFullname
	saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + rbacNamespace}
)

// TestServiceAccount_CanDoWhatDsguardNeedsAndNothingMore installs the chart
// (Helm 4, as release rbac in its own namespace), then proves both halves:
// dsguard serve, run with exactly the ServiceAccount's identity, becomes
// ready, wins the leader election, records Events, authenticates metrics
// scrapes and rejects kubectl through the installed webhook configuration
// without a single forbidden request; and `kubectl auth can-i` answers yes to
// what it needs and no to the rest.
func TestServiceAccount_CanDoWhatDsguardNeedsAndNothingMore(t *testing.T) {
	// Only this release's webhook may answer.
	withoutSuiteWebhook(t)
	mustKubectl(t, "", "create", "namespace", rbacNamespace)

	dir, certPEM := servingCertDir(t)
	webhookPort, healthPort, metricsPort := freePort(t), freePort(t), freePort(t)

	h := helms()[1]
	r := helm(t, h, "install", rbacRelease, "charts/dsguard", "--namespace", rbacNamespace, "--set", "tls.mode=file",
		"--set", fmt.Sprintf("webhook.url=https://127.0.0.1:%d", webhookPort),
		"--set", "webhook.caBundle="+base64.StdEncoding.EncodeToString(certPEM))
	if r.Err != nil {
		t.Fatal(r.Error())
	}

	// dsguard as the ServiceAccount: the admin kubeconfig, impersonating it.
	kubeconfig := impersonatingKubeconfig(t, dir)
	// Cleanups run last-first: uninstall (the webhook configuration goes),
	// then stop dsguard.
	dsguard, _ := cluster.StartDsguardFor(t, saUser, healthPort, "serve", "--kubeconfig", kubeconfig, "--namespace", rbacNamespace,
		"--host", "127.0.0.1", "--port", strconv.Itoa(webhookPort), "--cert-dir", dir,
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(healthPort),
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(metricsPort), "--metrics-secure=true",
		"--leader-elect=true", "--shutdown-timeout", "5s")
	dsguardLog := dsguard.Log
	t.Cleanup(func() { uninstall(t, h, rbacRelease, rbacNamespace) })

	t.Run("leader election", func(t *testing.T) {
		var holder string
		eventually(t, 30*time.Second, func() bool {
			holder = kubectl(t, "", "get", "lease", "dsguard-coverage", "-n", rbacNamespace,
				"-o", "jsonpath={.spec.holderIdentity}").Stdout
			return holder != ""
		}, dsguardLog)
	})

	t.Run("events", func(t *testing.T) {
		// PolicyLoaded through events.k8s.io, the leader election through core v1.
		var got string
		eventually(t, 30*time.Second, func() bool {
			got = kubectl(t, "", "get", "events", "-n", rbacNamespace, "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}").Stdout
			return strings.Contains(got, "PolicyLoaded") && strings.Contains(got, "LeaderElection")
		}, func() string { return "events: " + got + "\n" + dsguardLog() })
	})

	t.Run("webhook", func(t *testing.T) {
		nodeExporter := example(t, "node-exporter.yaml")
		var last framework.Result
		eventually(t, 30*time.Second, func() bool {
			last = kubectl(t, nodeExporter, "apply", "--dry-run=server", "-f", "-")
			return denied(last, dsWebhook, cpDenied)
		}, func() string { return last.Stderr })
	})

	t.Run("metrics", func(t *testing.T) {
		cluster.DeleteOnCleanup(t, "serviceaccount", "-n", "monitoring", "prometheus", "nobody")
		for _, sa := range []string{"prometheus", "nobody"} {
			mustKubectl(t, "", "create", "serviceaccount", sa, "-n", "monitoring")
		}
		cluster.DeleteOnCleanup(t, "clusterrolebinding", "prometheus-reads-dsguard")
		mustKubectl(t, "", "create", "clusterrolebinding", "prometheus-reads-dsguard",
			"--clusterrole="+rbacFullname+"-metrics-reader", "--serviceaccount=monitoring:prometheus")
		url := fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort)
		for _, c := range []struct {
			sa   string
			want int
		}{{"prometheus", http.StatusOK}, {"nobody", http.StatusForbidden}, {"", http.StatusUnauthorized}} {
			token := ""
			if c.sa != "" {
				// Not logged: cluster.Kubectl, not kubectl.
				tr := cluster.Kubectl(t.Context(), "", "create", "token", c.sa, "-n", "monitoring")
				if tr.Err != nil {
					t.Fatal(tr.Error())
				}
				token = strings.TrimSpace(tr.Stdout)
			}
			status, body := scrape(t, url, token)
			if status != c.want {
				t.Errorf("scrape as %q: HTTP %d, want %d", c.sa, status, c.want)
			}
			if c.want == http.StatusOK && !strings.Contains(body, "dsguard_policy_generation") {
				t.Errorf("scrape as %q: no dsguard metrics:\n%.500s", c.sa, body)
			}
		}

		// A Pod holding connections open on the metrics port: 200 that
		// never send a byte. The port keeps at most its cap (32), the flood
		// evicts itself, and Prometheus still scrapes.
		for range 200 {
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", metricsPort))
			if err != nil {
				t.Fatalf("flooding the metrics port: %v", err)
			}
			defer conn.Close()
		}
		token := strings.TrimSpace(cluster.Kubectl(t.Context(), "", "create", "token", "prometheus", "-n", "monitoring").Stdout)
		var last string
		eventually(t, 30*time.Second, func() bool {
			status, body := scrape(t, url, token)
			last = fmt.Sprintf("HTTP %d\n%.300s", status, body)
			if status != http.StatusOK {
				return false
			}
			m := regexp.MustCompile(`(?m)^dsguard_metrics_connections_evicted_total (\d+)`).FindStringSubmatch(body)
			n := 0
			if m != nil {
				n, _ = strconv.Atoi(m[1])
			}
			last = "dsguard_metrics_connections_evicted_total " + fmt.Sprint(n)
			return n >= 200-32
		}, func() string { return "after 200 silent connections to the metrics port: " + last })
	})

	t.Run("nothing forbidden", func(t *testing.T) {
		if log := dsguardLog(); strings.Contains(strings.ToLower(log), "forbidden") {
			t.Errorf("dsguard hit a forbidden request as %s:\n%s", saUser, log)
		}
	})

	t.Run("can-i matrix", func(t *testing.T) {
		// can-i resolves resources through discovery: install the OpenReports
		// CRD (from the Go module cache) so its rows can be asked.
		out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", "github.com/openreports/reports-api").Output()
		if err != nil {
			t.Fatalf("locating the OpenReports module: %v", err)
		}
		mustKubectl(t, "", "apply", "-f", filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "openreports.io_reports.yaml"))
		waitFor(t, "the OpenReports CRD to be served", func() bool {
			return cluster.Kubectl(t.Context(), "", "get", "reports.openreports.io", "-A").ExitCode == 0
		})
		checkCanI(t, saUser, saGroups, rbacMatrix)
	})
}

// impersonatingKubeconfig writes the cluster's admin kubeconfig with every
// user impersonating the release's ServiceAccount.
func impersonatingKubeconfig(t *testing.T, dir string) string {
	return impersonatingKubeconfigFor(t, dir, saUser, saGroups)
}

// impersonatingKubeconfigFor writes the admin kubeconfig acting as user.
func impersonatingKubeconfigFor(t *testing.T, dir, user string, groups []string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = user
		ai.ImpersonateGroups = groups
	}
	path := filepath.Join(dir, "kubeconfig-as-"+strings.ReplaceAll(user, ":", "-"))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// scrape GETs the metrics endpoint (self-signed certificate) with a bearer token.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the metrics certificate is self-signed
	}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// checkCanI asks `kubectl auth can-i` every row of matrix as user.
func checkCanI(t *testing.T, user string, groups []string, matrix []canI) {
	t.Helper()
	for _, c := range matrix {
		args := []string{"auth", "can-i", c.verb, c.resource, "--as=" + user}
		for _, g := range groups {
			args = append(args, "--as-group="+g)
		}
		switch c.namespace {
		case "":
		case "-A":
			args = append(args, "--all-namespaces")
		default:
			args = append(args, "-n", c.namespace)
		}
		args = append(args, c.extra...)
		r := cluster.Kubectl(t.Context(), "", args...)
		if r.ExitCode > 1 || r.ExitCode < 0 {
			t.Fatalf("%s: %s", r.Command, r.Error())
		}
		got := r.ExitCode == 0
		where := c.namespace
		if where == "" {
			where = "cluster"
		}
		line := fmt.Sprintf("%-11s %-55s %-14s %s", c.verb, c.resource+" "+strings.Join(c.extra, " "), where, strings.TrimSpace(r.Stdout))
		if got != c.want {
			t.Errorf("%s   want %v", line, map[bool]string{true: "yes", false: "no"}[c.want])
		} else {
			t.Log(line)
		}
	}
}
