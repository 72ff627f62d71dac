package certs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// throughDsguard returns a request that must pass through dsguard: a
// server-side dry-run create of node-exporter in namespace, which the policy
// denies. A 403 from dsguard means the request went through; any other
// outcome (a TLS or connection failure, a timeout) is returned as an error.
// Which dsguard judges it is up to the webhook configurations' namespace
// selectors: each leaves out its own dsguard's namespace.
func throughDsguard(t *testing.T, namespace string) func() error {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.Root, "examples", "node-exporter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(data, &ds); err != nil {
		t.Fatal(err)
	}
	ds.Namespace = namespace
	return func() error {
		_, err := kube.AppsV1().DaemonSets(namespace).Create(t.Context(), &ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "dsguard coverage rule") {
			return nil
		}
		return fmt.Errorf("not denied by dsguard: %v", err)
	}
}
