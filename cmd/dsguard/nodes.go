package main

import (
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func newNodesCommand() *cobra.Command {
	var (
		selector string
		output   string
	)
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "Save a cluster's node set for dsguard check --nodes",
		Long: "Nodes lists the cluster's Nodes and prints them as a v1 List holding only what coverage prediction\n" +
			"reads (name, labels, taints, unschedulable): no addresses, images, conditions or annotations. The\n" +
			"file is small enough to commit, so CI can judge coverage against production's nodes without\n" +
			"credentials for production.",
		Example: "  dsguard nodes > nodes.yaml\n" +
			"  dsguard nodes --context production -l node.kubernetes.io/instance-type -o json > nodes.json\n" +
			"  dsguard check manifests/ --nodes nodes.yaml -o wide",
		Args: cobra.NoArgs,
	}
	flags := newClusterFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if output != "yaml" && output != "json" {
			return fmt.Errorf("unknown output format %q (want yaml or json)", output)
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
		var list corev1.NodeList
		if err := c.List(cmd.Context(), &list, opts...); err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		out := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
		for i := range list.Items {
			out.Items = append(out.Items, runtime.RawExtension{Object: savedNode(&list.Items[i])})
		}
		return printObject(cmd.OutOrStdout(), output, out)
	}
	f := cmd.Flags()
	f.StringVarP(&selector, "selector", "l", "", "label selector of the nodes to save (e.g. -l kubernetes.io/os=linux)")
	f.StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("yaml", "json"))
	return cmd
}

// savedNode keeps what the DaemonSet controller's placement reads.
func savedNode(n *corev1.Node) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
	}
}
