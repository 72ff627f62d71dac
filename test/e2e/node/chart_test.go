package node

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// chartValues are the only values the install sets: the image reference
// pointed at the locally built image. Everything else is the chart's default
// (self-managed certificates, priority class, hooks, NetworkPolicy).
func chartValues() []string {
	return []string{"--set", "image.repository=" + image.Repository(), "--set", "image.tag=" + image.Tag()}
}

// TestHelmInstall_RealNode is the path a user takes, once with Helm 3 and
// once with Helm 4: install with default values, both replicas Ready, the
// webhook denying and warning through its Service, a policy change by
// `helm upgrade`, and `helm uninstall` leaving DaemonSet writes working.
func TestHelmInstall_RealNode(t *testing.T) {
	requireNode(t)
	for _, bin := range []string{"helm", "helm4"} {
		t.Run(bin, func(t *testing.T) {
			// The tests that only need dsguard up leave their release
			// installed (installed); this one installs its own.
			if r := cluster.Helm(t.Context(), bin, "status", release, "-n", namespace); r.Err == nil {
				mustHelm(t, bin, "uninstall", release, "-n", namespace, "--wait", "--timeout", "2m")
			}
			install(t, bin)
			t.Run("helm test proves the webhook answers", func(t *testing.T) {
				out := mustHelm(t, bin, "test", release, "-n", namespace, "--timeout", "4m")
				if !strings.Contains(out, "Succeeded") {
					t.Fatalf("helm test did not report success:\n%s", out)
				}
			})
			t.Run("node-exporter without tolerations is denied through the Service", func(t *testing.T) {
				r := kubectl(t, example(t, "node-exporter.yaml"), "apply", "-f", "-")
				if r.Err == nil || !strings.Contains(r.Stderr, "denied the request") || !strings.Contains(r.Stderr, "control-plane-toleration") {
					t.Fatalf("want dsguard's denial (control-plane-toleration), got exit %d:\n%s", r.ExitCode, r.Stderr)
				}
			})
			t.Run("a compliant DaemonSet is admitted with its warnings", func(t *testing.T) {
				r := kubectl(t, example(t, "node-exporter-tolerations.yaml"), "apply", "-f", "-")
				if r.Err != nil || !strings.Contains(r.Stdout, "daemonset.apps/node-exporter created") {
					t.Fatalf("want it created: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
				}
				for _, w := range warnings(r.Stderr) {
					if !regexp.MustCompile(`^Warning: [a-z0-9-]+: `).MatchString(w) {
						t.Errorf("warning %q is not one of dsguard's (rule: message)", w)
					}
				}
				mustKubectl(t, "", "delete", "daemonset", "-n", "monitoring", "node-exporter", "--wait=false")
			})
			t.Run("helm upgrade changes the policy", func(t *testing.T) {
				mustHelm(t, bin, append([]string{"upgrade", release, "charts/dsguard", "-n", namespace, "--wait", "--timeout", "3m",
					"--set", "policy.enforcement=warn"}, chartValues()...)...)
				manifest := example(t, "node-exporter.yaml", "name: node-exporter\n", "name: ne-after-upgrade\n")
				took := eventually(t, 60*time.Second, func() bool {
					r := cluster.Kubectl(t.Context(), manifest, "apply", "--dry-run=server", "-f", "-")
					return r.Err == nil && strings.Contains(r.Stderr, "Warning: control-plane-toleration")
				}, func() string {
					r := cluster.Kubectl(t.Context(), manifest, "apply", "--dry-run=server", "-f", "-")
					return r.Stdout + r.Stderr
				})
				t.Logf("warn instead of deny %s after helm upgrade returned", took.Round(time.Millisecond))
			})
			t.Run("helm uninstall leaves DaemonSet writes working", func(t *testing.T) {
				mustHelm(t, bin, "uninstall", release, "-n", namespace, "--wait", "--timeout", "2m")
				if r := kubectl(t, "", "get", "validatingwebhookconfigurations", "-o", "name"); strings.Contains(r.Stdout, "dsguard") {
					t.Errorf("a webhook configuration is left behind: %s", r.Stdout)
				}
				r := kubectl(t, example(t, "node-exporter.yaml", "name: node-exporter\n", "name: ne-after-uninstall\n"), "apply", "-f", "-")
				if r.Err != nil {
					t.Fatalf("DaemonSet write after helm uninstall: %v\n%s", r.Err, r.Stderr)
				}
				mustKubectl(t, "", "delete", "daemonset", "-n", "monitoring", "ne-after-uninstall", "--wait=false")
			})
		})
	}
}

// install runs `helm install` with the default values and waits for both
// replicas to be Ready and for the API server to call them.
func install(t *testing.T, bin string) {
	t.Helper()
	installRelease(t, bin, release, namespace, release)
}

// installRelease installs the chart as release into ns with the image built
// here and the values set, and waits for the Deployment fullname's two
// replicas to be Ready and for the API server to call them.
func installRelease(t *testing.T, bin, release, namespace, fullname string, set ...string) {
	t.Helper()
	if r := cluster.Kubectl(t.Context(), "", "get", "namespace", "monitoring"); r.Err != nil {
		mustKubectl(t, "", "create", "namespace", "monitoring")
	}
	// helm uninstall --wait waits for the Deployment, not for the Pods the
	// garbage collector deletes after it: a reinstall of the same chart makes
	// a ReplicaSet with the same template hash, and the old release's
	// terminating Pods would be counted as this one's.
	eventually(t, 2*time.Minute, func() bool {
		r := cluster.Kubectl(t.Context(), "", "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/name=dsguard", "-o", "name")
		return r.Err == nil && strings.TrimSpace(r.Stdout) == ""
	}, func() string {
		return "the previous release's Pods are still there: " + cluster.Kubectl(t.Context(), "", "get", "pods", "-n", namespace, "-o", "wide").Stdout
	})
	start := time.Now()
	mustHelm(t, bin, append([]string{"install", release, "charts/dsguard", "-n", namespace, "--create-namespace",
		"--wait", "--timeout", "4m"}, append(chartValues(), set...)...)...)
	t.Logf("helm install --wait took %s", time.Since(start).Round(time.Millisecond))
	ready := mustKubectl(t, "", "get", "deployment", "-n", namespace, fullname, "-o", "jsonpath={.status.readyReplicas}/{.spec.replicas}")
	if ready != "2/2" {
		t.Fatalf("ready replicas %s, want 2/2", ready)
	}
	eventually(t, 60*time.Second, func() bool {
		r := cluster.Kubectl(t.Context(), example(t, "node-exporter.yaml"), "apply", "--dry-run=server", "-f", "-")
		return strings.Contains(r.Stderr, "control-plane-toleration")
	}, func() string { return "the API server does not call dsguard" })
}

// TestContainer_RunsAsTheChartSays reads the security settings from the node
// itself: /proc/<pid>/status and mountinfo of the dsguard process.
func TestContainer_RunsAsTheChartSays(t *testing.T) {
	requireNode(t)
	installed(t, "helm")
	pods := strings.Fields(mustKubectl(t, "", "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/name=dsguard",
		"-o", `jsonpath={range .items[*]}{.status.containerStatuses[0].containerID}{" "}{end}`))
	if len(pods) != 2 {
		t.Fatalf("want 2 dsguard containers, got %v", pods)
	}
	tasks := cluster.Ctr(t.Context(), "tasks", "ls")
	if tasks.Err != nil {
		t.Fatal(tasks.Error())
	}
	for _, id := range pods {
		id = strings.TrimPrefix(id, "containerd://")
		pid := ""
		for _, l := range splitLines(tasks.Stdout) {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == id {
				pid = f[1]
			}
		}
		if pid == "" {
			t.Fatalf("container %s not among containerd's tasks:\n%s", id, tasks.Stdout)
		}
		status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("/proc/%s/status of container %s:\n%s", pid, id[:12], status)
		want := map[string]string{
			"Uid":        "65532\t65532\t65532\t65532",
			"Gid":        "65532\t65532\t65532\t65532",
			"CapInh":     "0000000000000000",
			"CapPrm":     "0000000000000000",
			"CapEff":     "0000000000000000",
			"CapBnd":     "0000000000000000",
			"CapAmb":     "0000000000000000",
			"NoNewPrivs": "1",
			"Seccomp":    "2", // filter mode: the runtime's default profile
		}
		// What the image's dsguard holds on a real node, its executable as
		// the container runtime unpacked it (the load harness's figures
		// are for an executable read from disk, at 5,000 nodes).
		memory := map[string]string{}
		for _, l := range splitLines(string(status)) {
			k, v, _ := strings.Cut(l, ":")
			if k == "VmRSS" || k == "RssAnon" || k == "RssFile" {
				memory[k] = strings.TrimSpace(v)
			}
			if w, ok := want[k]; ok {
				if strings.TrimSpace(v) != w {
					t.Errorf("container %s: %s = %q, want %q", id[:12], k, strings.TrimSpace(v), w)
				}
				delete(want, k)
			}
		}
		for k := range want {
			t.Errorf("container %s: no %s line in /proc/%s/status", id[:12], k, pid)
		}
		t.Logf("figures: container %s, one node: RSS %s (anonymous %s, executable and other files %s)",
			id[:12], memory["VmRSS"], memory["RssAnon"], memory["RssFile"])
		mountinfo, err := os.ReadFile(filepath.Join("/proc", pid, "mountinfo"))
		if err != nil {
			t.Fatal(err)
		}
		rootRO := false
		for _, l := range splitLines(string(mountinfo)) {
			if f := strings.Fields(l); len(f) > 5 && f[4] == "/" {
				rootRO = strings.HasPrefix(f[5], "ro")
			}
		}
		if !rootRO {
			t.Errorf("container %s: / is not mounted read-only:\n%s", id[:12], mountinfo)
		}
		if _, err := os.Stat(filepath.Join("/proc", pid, "root", "bin", "sh")); err == nil {
			t.Errorf("container %s has /bin/sh", id[:12])
		}
	}
	// The probes pass: Ready, and never restarted.
	out := mustKubectl(t, "", "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/name=dsguard", "-o",
		`jsonpath={range .items[*]}{.status.containerStatuses[0].ready}|{.status.containerStatuses[0].restartCount}|{.spec.containers[0].readinessProbe.httpGet.path}|{.spec.containers[0].livenessProbe.httpGet.path}{" "}{end}`)
	for _, p := range strings.Fields(out) {
		f := strings.Split(p, "|")
		if len(f) != 4 || f[0] != "true" || f[1] != "0" || f[2] == "" || f[3] == "" {
			t.Errorf("pod ready|restarts|readiness path|liveness path = %s, want ready, no restart, both probes set", p)
		}
	}
}

// TestPodDisruptionBudget_BlocksEvictingTheLastReplica evicts through the
// Eviction API, as `kubectl drain` does, with one replica left.
func TestPodDisruptionBudget_BlocksEvictingTheLastReplica(t *testing.T) {
	requireNode(t)
	installed(t, "helm")
	mustKubectl(t, "", "scale", "deployment", "-n", namespace, release, "--replicas=1")
	defer mustKubectl(t, "", "scale", "deployment", "-n", namespace, release, "--replicas=2")
	var pod string
	eventually(t, 90*time.Second, func() bool {
		out := cluster.Kubectl(t.Context(), "", "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/name=dsguard",
			"-o", `jsonpath={range .items[?(@.metadata.deletionTimestamp)]}x{end}{" "}{.items[*].metadata.name}`).Stdout
		f := strings.Fields(out)
		if len(f) == 1 {
			pod = f[0]
		}
		pdb := cluster.Kubectl(t.Context(), "", "get", "pdb", "-n", namespace, release, "-o", "jsonpath={.status.disruptionsAllowed}").Stdout
		return len(f) == 1 && pdb == "0"
	}, func() string { return mustKubectl(t, "", "get", "pods,pdb", "-n", namespace) })
	eviction := fmt.Sprintf(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":%q,"namespace":%q}}`, pod, namespace)
	r := kubectl(t, eviction, "create", "--raw", "/api/v1/namespaces/"+namespace+"/pods/"+pod+"/eviction", "-f", "-")
	if r.Err == nil || !strings.Contains(r.Stderr, "disruption budget") {
		t.Fatalf("evicting the last replica: want it refused for the disruption budget, got %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
}

// TestPodDeletion_NoFailedAdmission applies DaemonSets (server-side dry
// run, each one a webhook call) in a loop while one dsguard Pod is deleted
// and replaced: the Service never routes a call to a replica that is going.
func TestPodDeletion_NoFailedAdmission(t *testing.T) {
	requireNode(t)
	installed(t, "helm")
	manifest := example(t, "node-exporter-tolerations.yaml")
	pods := strings.Fields(mustKubectl(t, "", "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/name=dsguard", "-o", "jsonpath={.items[*].metadata.name}"))
	if len(pods) != 2 {
		t.Fatalf("want 2 pods, got %v", pods)
	}
	stop := make(chan struct{})
	type result struct {
		ok, failed int
		errs       []string
	}
	done := make(chan result)
	go func() {
		var res result
		for {
			select {
			case <-stop:
				done <- res
				return
			default:
			}
			r := cluster.Kubectl(t.Context(), manifest, "apply", "--dry-run=server", "-f", "-")
			if r.Err != nil {
				res.failed++
				res.errs = append(res.errs, r.Stderr)
			} else {
				res.ok++
			}
		}
	}()
	time.Sleep(2 * time.Second)
	mustKubectl(t, "", "delete", "pod", "-n", namespace, pods[0], "--wait=true")
	eventually(t, 3*time.Minute, func() bool {
		out := cluster.Kubectl(t.Context(), "", "get", "deployment", "-n", namespace, release, "-o", "jsonpath={.status.readyReplicas}/{.status.updatedReplicas}/{.status.replicas}").Stdout
		return out == "2/2/2"
	}, func() string { return mustKubectl(t, "", "get", "pods", "-n", namespace, "-o", "wide") })
	time.Sleep(3 * time.Second)
	close(stop)
	res := <-done
	t.Logf("%d admissions while a replica was deleted and replaced, %d failed", res.ok+res.failed, res.failed)
	if res.failed > 0 {
		t.Errorf("%d failed admissions; first: %s", res.failed, res.errs[0])
	}
	if res.ok < 5 {
		t.Errorf("only %d admissions during the replacement: the loop did not run", res.ok)
	}
}

// TestAudit_GapFromRealKubeletStatus: a DaemonSet whose readiness probe
// always fails runs on the real node; the kubelet reports it not ready and
// `dsguard audit` names the gap from that status.
func TestAudit_GapFromRealKubeletStatus(t *testing.T) {
	requireNode(t)
	installed(t, "helm")
	ds := fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: never-ready
  namespace: monitoring
spec:
  selector:
    matchLabels: {app: never-ready}
  template:
    metadata:
      labels: {app: never-ready}
    spec:
      tolerations:
        - operator: Exists
      containers:
        - name: pause
          image: %s
          readinessProbe:
            tcpSocket:
              port: 9
            periodSeconds: 2
`, "dsguard.local/pause:e2e")
	mustKubectl(t, ds, "apply", "-f", "-")
	defer mustKubectl(t, "", "delete", "daemonset", "-n", "monitoring", "never-ready", "--wait=false")
	// The kubelet runs the container and reports it not ready.
	eventually(t, 2*time.Minute, func() bool {
		out := cluster.Kubectl(t.Context(), "", "get", "pods", "-n", "monitoring", "-l", "app=never-ready",
			"--field-selector", "spec.nodeName=dsguard-node", "-o",
			`jsonpath={.items[0].status.containerStatuses[0].started}/{.items[0].status.containerStatuses[0].ready}`).Stdout
		return out == "true/false"
	}, func() string { return mustKubectl(t, "", "get", "pods", "-n", "monitoring", "-o", "wide") })
	var r = cluster.Kubectl(t.Context(), "", "get", "daemonset", "-n", "monitoring", "never-ready", "-o", "jsonpath={.status}")
	t.Logf("DaemonSet status from the controller: %s", r.Stdout)
	audit := runDsguard(t, "audit", "-n", "monitoring", "never-ready", "-o", "wide")
	t.Logf("$ dsguard audit -n monitoring never-ready -o wide\n%s%s", audit.Stdout, audit.Stderr)
	// The node line comes from the Pod's conditions as the kubelet wrote them.
	gap := regexp.MustCompile(`node dsguard-node: pod never-ready-\S+ NotReady: readiness failing for container pause`)
	if !strings.Contains(audit.Stdout, "CoverageGap") || !gap.MatchString(audit.Stdout) {
		t.Errorf("dsguard audit does not report the failing readiness probe on dsguard-node:\n%s%s", audit.Stdout, audit.Stderr)
	}
}

// installed makes sure a release is installed and both replicas are Ready,
// for the tests that need dsguard up but do not test the install itself.
func installed(t *testing.T, bin string) {
	t.Helper()
	if r := cluster.Helm(t.Context(), bin, "status", release, "-n", namespace); r.Err != nil {
		install(t, bin)
		return
	}
	mustKubectl(t, "", "rollout", "status", "deployment", "-n", namespace, release, "--timeout=3m")
	eventually(t, 2*time.Minute, func() bool {
		return cluster.Kubectl(t.Context(), "", "get", "deployment", "-n", namespace, release, "-o", "jsonpath={.status.readyReplicas}").Stdout == "2"
	}, func() string { return mustKubectl(t, "", "get", "pods", "-n", namespace, "-o", "wide") })
}

// runDsguard runs the dsguard binary of the image on the host against the cluster.
func runDsguard(t *testing.T, args ...string) framework.Result {
	t.Helper()
	return framework.Run(t.Context(), cluster.Root, "", nil, dsguardBin, append(args, "--kubeconfig", cluster.Kubeconfig)...)
}
