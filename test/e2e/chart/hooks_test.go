package chart

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

const (
	hooksNamespace = "dsguard-hooks"
	hooksRelease   = "hooks"
	hooksFullname  = "hooks-dsguard"
)

// TestHelmHooks_TestAndPreDelete runs the chart's two hooks as Helm runs
// them, with Helm 3 (the version whose uninstall order needs the pre-delete
// hook). This API server has no kubelet, so where the kubelet would start the
// hook's container, the test runs the container's own command line with the
// hook's ServiceAccount (impersonated), then reports the Pod or Job finished
// the way the kubelet and the Job controller would.
//
//   - `helm test`: `dsguard hook test` gets dsguard's refusal of the smoke-test
//     DaemonSet through the release's webhook configuration; the same command
//     fails where dsguard is not called.
//   - `helm uninstall`: the pre-delete Job runs while the Deployment still
//     exists and deletes the webhook configuration; Helm then removes the rest.
func TestHelmHooks_TestAndPreDelete(t *testing.T) {
	// Only the release's webhook configuration may answer: the suite's
	// judges DaemonSets in the release's namespace.
	withoutSuiteWebhook(t)
	mustKubectl(t, "", "create", "namespace", hooksNamespace)
	h := helms()[0]
	if r := helm(t, h, "install", hooksRelease, "charts/dsguard", "--namespace", hooksNamespace, "--set", "tls.mode=file",
		"--set", "webhook.url="+cluster.WebhookURL, "--set", "webhook.caBundle="+caBundle); r.Err != nil {
		t.Fatal(r.Error())
	}
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			uninstall(t, h, hooksRelease, hooksNamespace)
		}
	})
	dir := t.TempDir()
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + hooksNamespace}

	t.Run("helm test", func(t *testing.T) {
		pod := hooksFullname + "-test"
		helmDone := background(t, h, "test", hooksRelease, "--namespace", hooksNamespace, "--timeout", "90s")
		args := hookArgs(t, "pod", pod, "{.spec.containers[0].args}")
		kc := impersonatingKubeconfigFor(t, dir, "system:serviceaccount:"+hooksNamespace+":"+pod, saGroups)
		r := runCmd(t.Context(), "", nil, cluster.Dsguard, append(args, "--kubeconfig", kc)...)
		t.Logf("$ dsguard %s\n%s%s", strings.Join(args, " "), r.Stdout, r.Stderr)
		if r.Err != nil || !strings.Contains(r.Stdout, `ok: admission webhook "daemonsets.dsguard.io" denied the request`) ||
			!strings.Contains(r.Stdout, "surge-host-port") {
			t.Fatalf("the test Pod's command did not get dsguard's refusal: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
		}
		// The kubelet's part: the container exited 0.
		mustKubectl(t, "", "patch", "pod", pod, "-n", hooksNamespace, "--subresource=status", "--type=merge",
			"-p", `{"status":{"phase":"Succeeded"}}`)
		hr := <-helmDone
		if hr.Err != nil || !regexp.MustCompile(`Phase:\s+Succeeded`).MatchString(hr.Stdout) {
			t.Fatalf("helm test did not pass: %v\n%s%s", hr.Err, hr.Stdout, hr.Stderr)
		}

		// The same command fails where dsguard is not called: dsguard's own
		// namespace is never evaluated.
		r = runCmd(t.Context(), "", nil, cluster.Dsguard, "hook", "test", "--namespace="+hooksNamespace, "--timeout=3s",
			"--kubeconfig", cluster.Kubeconfig)
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, "admitted without a word from dsguard") {
			t.Errorf("dsguard hook test passed in a namespace dsguard never sees:\n%s%s", r.Stdout, r.Stderr)
		}
	})

	t.Run("helm uninstall", func(t *testing.T) {
		job := hooksFullname + "-pre-delete"
		helmDone := background(t, h, "uninstall", hooksRelease, "--namespace", hooksNamespace, "--timeout", "90s")
		args := hookArgs(t, "job", job, "{.spec.template.spec.containers[0].args}")
		// Pre-delete: nothing of the release is gone yet.
		mustKubectl(t, "", "get", "deployment", hooksFullname, "-n", hooksNamespace)
		mustKubectl(t, "", "get", "validatingwebhookconfiguration", hooksFullname)

		kc := impersonatingKubeconfigFor(t, dir, "system:serviceaccount:"+hooksNamespace+":"+job, saGroups)
		r := runCmd(t.Context(), "", nil, cluster.Dsguard, append(args, "--kubeconfig", kc)...)
		t.Logf("$ dsguard %s\n%s%s", strings.Join(args, " "), r.Stdout, r.Stderr)
		if r.Err != nil || !strings.Contains(r.Stdout, "deleted ValidatingWebhookConfiguration "+hooksFullname) {
			t.Fatalf("the pre-delete Job's command failed: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
		}
		if g := kubectl(t, "", "get", "validatingwebhookconfiguration", hooksFullname); !strings.Contains(g.Stderr, "NotFound") {
			t.Fatalf("the webhook configuration survived the pre-delete hook")
		}
		// A second run (a retried Pod) finds it gone and still succeeds.
		if r := runCmd(t.Context(), "", nil, cluster.Dsguard, append(args, "--kubeconfig", kc)...); r.Err != nil ||
			!strings.Contains(r.Stdout, "already gone") {
			t.Errorf("a retried pre-delete failed: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
		}
		// The Job controller's part: the Job completed.
		now := time.Now().UTC().Format(time.RFC3339)
		mustKubectl(t, "", "patch", "job", job, "-n", hooksNamespace, "--subresource=status", "--type=merge", "-p",
			`{"status":{"startTime":"`+now+`","completionTime":"`+now+`","succeeded":1,"conditions":[`+
				`{"type":"SuccessCriteriaMet","status":"True","lastTransitionTime":"`+now+`"},`+
				`{"type":"Complete","status":"True","lastTransitionTime":"`+now+`"}]}}`)
		hr := <-helmDone
		if hr.Err != nil {
			t.Fatalf("helm uninstall failed: %v\n%s%s", hr.Err, hr.Stdout, hr.Stderr)
		}
		uninstalled = true
		for _, obj := range [][]string{{"deployment", hooksFullname, "-n", hooksNamespace}, {"job", job, "-n", hooksNamespace},
			{"clusterrole", job}, {"serviceaccount", job, "-n", hooksNamespace}} {
			if g := kubectl(t, "", append([]string{"get"}, obj...)...); !strings.Contains(g.Stderr, "NotFound") {
				t.Errorf("%v is left after helm uninstall", obj)
			}
		}
	})
}

// background runs a Helm command and hands back its result when it ends.
func background(t *testing.T, h helmBin, args ...string) <-chan framework.Result {
	done := make(chan framework.Result, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	go func() {
		defer cancel()
		home := t.TempDir()
		r := runCmd(ctx, "", []string{"HELM_CONFIG_HOME=" + home, "HELM_CACHE_HOME=" + home, "HELM_DATA_HOME=" + home},
			h.path, append(args, "--kubeconfig", cluster.Kubeconfig)...)
		done <- r
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case r := <-done:
			t.Logf("$ %s %s\n%s%s", h.name, strings.Join(args, " "), r.Stdout, r.Stderr)
		default:
		}
	})
	return done
}

// hookArgs waits for a hook object Helm created and returns its container's
// arguments (the image runs dsguard with them).
func hookArgs(t *testing.T, kind, name, jsonpath string) []string {
	t.Helper()
	var raw string
	waitFor(t, kind+" "+name, func() bool {
		raw = cluster.Kubectl(t.Context(), "", "get", kind, name, "-n", hooksNamespace, "-o", "jsonpath="+jsonpath).Stdout
		return raw != ""
	})
	var args []string
	for _, a := range strings.Split(strings.Trim(raw, "[]"), ",") {
		args = append(args, strings.Trim(a, `"`))
	}
	if len(args) < 2 || args[0] != "hook" {
		t.Fatalf("%s %s runs %v, want dsguard hook ...", kind, name, args)
	}
	return args
}
