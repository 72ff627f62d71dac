package security

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// example reads examples/<name> as a DaemonSet, renamed and placed in ns.
func example(t *testing.T, name, dsName, ns string) *appsv1.DaemonSet {
	t.Helper()
	ds := framework.ExampleDaemonSet(t, cluster.Root, name)
	ds.Name, ds.Namespace, ds.ResourceVersion = dsName, ns, ""
	framework.OwnHostPort(ds)
	return ds
}

// compliant is node-exporter with the control-plane toleration: dsguard
// admits it without a deny.
func compliant(t *testing.T, dsName, ns string) *appsv1.DaemonSet {
	t.Helper()
	return example(t, "node-exporter-tolerations.yaml", dsName, ns)
}

// toYAML renders a DaemonSet for kubectl.
func toYAML(t *testing.T, ds *appsv1.DaemonSet) string {
	t.Helper()
	ds.APIVersion, ds.Kind = "apps/v1", "DaemonSet"
	data, err := yaml.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func kubectl(t *testing.T, stdin string, args ...string) framework.Result {
	t.Helper()
	return framework.Logged(t, cluster.Kubectl(t.Context(), stdin, args...))
}

// chartPolicyManifest is the chart's policy ConfigMap, to restore after a
// test changed the policy.
func chartPolicyManifest(t *testing.T) string {
	t.Helper()
	r := cluster.Helm(t.Context(), "template", "dsguard", "charts/dsguard", "--namespace", framework.Namespace,
		"--show-only", "templates/policy-configmap.yaml")
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	return r.Stdout
}

// policyConfigMap is the policy ConfigMap holding a PolicyConfig whose
// fields after apiVersion and kind are body.
func policyConfigMap(body string) string {
	doc := "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n" + body
	return `apiVersion: v1
kind: ConfigMap
metadata:
  name: dsguard-policy
  namespace: ` + framework.Namespace + `
  labels:
    dsguard.io/policy: "true"
data:
  policy.yaml: |
` + "    " + strings.ReplaceAll(strings.TrimSuffix(doc, "\n"), "\n", "\n    ") + "\n"
}

// restoreChartPolicy applies the chart's policy ConfigMap (manifest) again
// and waits until dsguard has loaded it, so that the next test meets that
// policy, not the one this test left in force a moment longer.
func restoreChartPolicy(t *testing.T, manifest string) {
	t.Helper()
	before, err := framework.SumMetric(scrape(t), "dsguard_policy_generation")
	if err != nil {
		t.Error(err)
	}
	r := kubectl(t, manifest, "apply", "-f", "-")
	if r.Err != nil {
		t.Errorf("restoring the chart's policy: %v", r.Error())
		return
	}
	if strings.Contains(r.Stdout, "unchanged") {
		return
	}
	var last string
	framework.Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
		g, err := framework.SumMetric(scrape(t), "dsguard_policy_generation")
		last = fmt.Sprint(g, " ", err)
		return err == nil && g > before
	}, func() string {
		return fmt.Sprintf("dsguard did not load the restored chart policy: dsguard_policy_generation %s, was %v before", last, before)
	})
}

func warnings(r framework.Result) []string {
	var out []string
	for _, line := range strings.Split(r.Stderr, "\n") {
		if w, ok := strings.CutPrefix(line, "Warning: "); ok {
			out = append(out, w)
		}
	}
	return out
}

// noAuthDsguard is a second dsguard, without client authentication and
// with the API server's addresses known (the chart's default install),
// serving one DaemonSet entry of its own for the DaemonSets of namespace.
type noAuthDsguard struct {
	name          string // the webhook configuration's and the CA Secret's prefix
	namespace     string // the namespace the entry matches
	failurePolicy string
	timeout       int      // the entry's timeoutSeconds
	port, health  int      // the webhook and health ports on 127.0.0.1
	flags         []string // more flags of dsguard serve
}

// start applies the entry, starts dsguard and waits until it is ready;
// everything is removed when the test ends.
func (d noAuthDsguard) start(t *testing.T) *framework.Process {
	t.Helper()
	vwc, caSecret := d.name, d.name+"-ca"
	manifest := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: %s
webhooks:
  - name: %s.daemonsets.dsguard.io
    clientConfig:
      url: https://localhost:%d/validate-daemonset
    rules:
      - apiGroups: [apps]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [daemonsets]
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: %s
    failurePolicy: %s
    sideEffects: None
    admissionReviewVersions: [v1]
    timeoutSeconds: %d
`, vwc, d.name, d.port, d.namespace, d.failurePolicy, d.timeout)
	if r := kubectl(t, manifest, "apply", "-f", "-"); r.ExitCode != 0 {
		t.Fatal(r.Error())
	}
	t.Cleanup(func() { kubectl(t, "", "delete", "validatingwebhookconfiguration", vwc, "--ignore-not-found") })
	args := append([]string{"serve", "--kubeconfig", cluster.Kubeconfig, "--namespace", framework.Namespace,
		"--cert-mode=self-managed", "--cert-dns-names=localhost", "--webhook-config-name=" + vwc, "--ca-secret=" + caSecret,
		"--host", "127.0.0.1", "--port", strconv.Itoa(d.port),
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(d.health),
		"--leader-elect=false", "--api-server-addresses=127.0.0.1,::1", "--shutdown-timeout", "5s"}, d.flags...)
	// Registered first, so it runs after dsguard stopped.
	t.Cleanup(func() { kubectl(t, "", "delete", "secret", "-n", framework.Namespace, caSecret, "--ignore-not-found") })
	p, _ := cluster.StartDsguardFor(t, d.name, d.health, args...)
	return p
}
