package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// ThroughDsguard returns a request that must pass through dsguard: a
// server-side dry-run create of examples/node-exporter.yaml (in namespace
// monitoring), which dsguard's control-plane-toleration rule denies. A 403
// from dsguard's daemonsets.dsguard.io entry means the request went through;
// any other outcome (a TLS or connection failure, a timeout, no webhook) is
// returned as an error. Each change edits the DaemonSet sent, as long as
// the rule still denies it.
func (c *Cluster) ThroughDsguard(kube kubernetes.Interface, changes ...func(*appsv1.DaemonSet)) (func(context.Context) error, error) {
	data, err := os.ReadFile(filepath.Join(c.Root, "examples", "node-exporter.yaml"))
	if err != nil {
		return nil, err
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(data, &ds); err != nil {
		return nil, err
	}
	for _, change := range changes {
		change(&ds)
	}
	return func(ctx context.Context) error {
		_, err := kube.AppsV1().DaemonSets(ds.Namespace).Create(ctx, &ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), `admission webhook "daemonsets.dsguard.io" denied the request`) {
			return nil
		}
		return fmt.Errorf("not denied by dsguard: %v", err)
	}, nil
}
