//go:build !offline

package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/policy/manifest"
)

// listPage is how many objects one LIST page of dsguard nodes and audit asks for.
const listPage = 500

func newNodesCommand() *cobra.Command {
	var (
		selector string
		output   string
		withFit  bool
	)
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "Save a cluster's node set for dsguard check --nodes",
		Long: "Nodes lists the cluster's Nodes and prints them as a v1 List holding only what coverage prediction\n" +
			"reads (name, labels, taints, unschedulable): no addresses, images, conditions or annotations. The\n" +
			"file is small enough to commit, so CI can judge coverage against production's nodes without\n" +
			"credentials for production.\n\n" +
			"With --fit it also saves what the scheduler weighs, so that check --nodes predicts whether the Pods\n" +
			"will land (resource-fit, priority-class, host-port-conflict, anti-affinity-conflict): each node's\n" +
			"allocatable; each Pod that has not finished reduced to its name, namespace, labels, controlling\n" +
			"DaemonSet, priority, start time, node, the request the scheduler counts, its host ports and required\n" +
			"anti-affinity terms (no image, command, environment, volume or address); the PriorityClasses; the\n" +
			"namespaces' labels. The List is written as it is listed, a page at a time.",
		Example: "  dsguard nodes > nodes.yaml\n" +
			"  dsguard nodes --context production -l node.kubernetes.io/instance-type -o json > nodes.json\n" +
			"  dsguard nodes --fit > cluster.yaml\n" +
			"  dsguard check manifests/ --nodes nodes.yaml -o wide",
		Args: cobra.NoArgs,
	}
	flags := newClusterFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		lw, err := manifest.NewListWriter(cmd.OutOrStdout(), output)
		if err != nil {
			return err
		}
		c, err := flags.client()
		if err != nil {
			return err
		}
		var opts []client.ListOption
		if selector != "" {
			sel, err := metav1.ParseToLabelSelector(selector)
			if err != nil {
				return fmt.Errorf("-l %s: %w", selector, err)
			}
			s, err := metav1.LabelSelectorAsSelector(sel)
			if err != nil {
				return fmt.Errorf("-l %s: %w", selector, err)
			}
			opts = append(opts, client.MatchingLabelsSelector{Selector: s})
		}
		ctx := cmd.Context()
		saved := map[string]bool{}
		if err := listEach(ctx, c, func() client.ObjectList { return &corev1.NodeList{} }, func(node *corev1.Node) error {
			n := savedNode(node)
			saved[n.Name] = true
			if withFit {
				n.Status.Allocatable = node.Status.Allocatable
			}
			return lw.Write(n)
		}, opts...); err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		if withFit {
			if err := writeFitObjects(ctx, c, lw, saved); err != nil {
				return err
			}
		}
		return lw.Close()
	}
	f := cmd.Flags()
	f.StringVarP(&selector, "selector", "l", "", "label selector of the nodes to save (e.g. -l kubernetes.io/os=linux)")
	f.StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	f.BoolVar(&withFit, "fit", false, "also save what the scheduler weighs: allocatable, the Pods reduced to their requests, ports, priority and anti-affinity, the PriorityClasses and namespace labels")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("yaml", "json"))
	return cmd
}

// writeFitObjects writes the Pods that have not finished (as the scheduler
// watches them) on the nodes saved, reduced; the PriorityClasses; the
// namespaces' labels.
func writeFitObjects(ctx context.Context, c client.Client, lw *manifest.ListWriter, nodes map[string]bool) error {
	notFinished := client.MatchingFieldsSelector{Selector: fields.ParseSelectorOrDie("status.phase!=Succeeded,status.phase!=Failed")}
	if err := listEach(ctx, c, func() client.ObjectList { return &corev1.PodList{} }, func(p *corev1.Pod) error {
		if node := cmp.Or(p.Spec.NodeName, p.Status.NominatedNodeName); !nodes[node] {
			return nil // pending nowhere, or on a node left out by -l
		}
		return lw.Write(fit.SavedPod(p))
	}, notFinished); err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	if err := listEach(ctx, c, func() client.ObjectList { return &schedulingv1.PriorityClassList{} }, func(pc *schedulingv1.PriorityClass) error {
		return lw.Write(&schedulingv1.PriorityClass{TypeMeta: metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
			ObjectMeta: metav1.ObjectMeta{Name: pc.Name}, Value: pc.Value, GlobalDefault: pc.GlobalDefault,
			PreemptionPolicy: pc.PreemptionPolicy})
	}); err != nil {
		return fmt.Errorf("listing priorityclasses: %w", err)
	}
	if err := listEach(ctx, c, func() client.ObjectList { return &corev1.NamespaceList{} }, func(ns *corev1.Namespace) error {
		return lw.Write(&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels}})
	}); err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	return nil
}

// listEach lists in pages of listPage through client-go's pager, which
// falls back to one whole list when a page's continue token has expired,
// and hands on each item as a *T, so that a cluster of a million Pods is
// never held whole.
func listEach[T any, PT interface {
	*T
	runtime.Object
}](ctx context.Context, c client.Client, newList func() client.ObjectList, each func(PT) error, opts ...client.ListOption) error {
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		l := newList()
		err := c.List(ctx, l, append(slices.Clone(opts), client.Limit(o.Limit), client.Continue(o.Continue))...)
		return l, err
	})
	p.PageSize = listPage
	return p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		item, ok := obj.(PT)
		if !ok {
			return fmt.Errorf("listing: got a %T", obj)
		}
		return each(item)
	})
}

// savedNode keeps what the DaemonSet controller's placement reads.
func savedNode(n *corev1.Node) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
	}
}
