package security

import (
	"fmt"
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
