//go:build !offline

package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coveragemap"
)

// podsByNode lists ds's Pods and reports each by the node it is bound or
// pinned to; Pods being deleted are left out.
func podsByNode(ctx context.Context, c client.Client, ds *appsv1.DaemonSet) (map[string]coveragemap.PodOnNode, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: selector: %w", ds.Namespace, ds.Name, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ds.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the Pods of %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	out := map[string]coveragemap.PodOnNode{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if ref := metav1.GetControllerOfNoCopy(p); ref == nil || ref.UID != ds.UID || p.DeletionTimestamp != nil {
			continue
		}
		out[coverage.DaemonPodNode(p)] = coveragemap.PodOnNode{Bound: p.Spec.NodeName != "", Ready: coverage.PodReady(p)}
	}
	return out, nil
}

// writeAuditMap writes the audit's pass as a coverage map, with each
// DaemonSet's Pods and status.
func writeAuditMap(ctx context.Context, w io.Writer, c client.Client, o *auditOptions, namespace string, pass *auditPass) error {
	in := coveragemap.Input{Nodes: slices.Values(pass.nodeList), PoolLabel: o.poolLabel, Title: auditScope(o, namespace)}
	for i, p := range pass.placements() {
		ds := pass.entries[i].DaemonSet
		pods, err := podsByNode(ctx, c, ds)
		if err != nil {
			return err
		}
		in.Agents = append(in.Agents, coveragemap.Agent{Namespace: ds.Namespace, Name: ds.Name, Placement: p,
			Pods: pods, Status: &ds.Status})
	}
	return mapFormats[o.output](coveragemap.Build(in), w)
}

// auditScope says which DaemonSets an audit looked at.
func auditScope(o *auditOptions, namespace string) string {
	s := "DaemonSets in namespace " + namespace
	if namespace == "" {
		s = "DaemonSets in all namespaces"
	}
	if o.selector != "" {
		s += " matching " + o.selector
	}
	return s
}
