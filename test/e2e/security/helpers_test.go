package security

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// example reads examples/<name> as a DaemonSet, renamed and placed in ns.
func example(t *testing.T, name, dsName, ns string) *appsv1.DaemonSet {
	t.Helper()
	ds := framework.ExampleDaemonSet(t, cluster.Root, name)
	ds.Name, ds.Namespace, ds.ResourceVersion = dsName, ns, ""
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

func warnings(r framework.Result) []string {
	var out []string
	for _, line := range strings.Split(r.Stderr, "\n") {
		if w, ok := strings.CutPrefix(line, "Warning: "); ok {
			out = append(out, w)
		}
	}
	return out
}
