package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/audit"
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

type auditOptions struct {
	kubeconfig, context string
	namespace           string
	allNamespaces       bool
	output              string
	exitCode            bool
	watch               bool
	interval, window    time.Duration
	configFile          string
	dsguardNamespace    string
}

func newAuditCommand() *cobra.Command {
	o := auditOptions{}
	cmd := &cobra.Command{
		Use:   "audit [NAME]",
		Short: "Audit the coverage of the DaemonSets in a cluster",
		Long: "Audit reads every DaemonSet's status counters and the live node set and says, per DaemonSet,\n" +
			"whether it covers the nodes it should: Healthy, RollingOut, AwaitingManualDelete, Misscheduled,\n" +
			"CoverageGap, PersistentGap (a gap older than --gap-window, seen with --watch) or NotObserved; how many\n" +
			"nodes it skips for untolerated taints (which desiredNumberScheduled does not show); and, for a gap,\n" +
			"node by node why there is no ready Pod. -o wide prints those details, -o json everything.\n\n" +
			"The policy is --config, else the dsguard-policy ConfigMap in --dsguard-namespace, else the defaults.",
		Example: "  dsguard audit -A\n  dsguard audit -n monitoring node-exporter -o wide\n  dsguard audit -A --exit-code   # for scripts: 1 on any gap",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return runAudit(cmd, &o, name)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "kubeconfig context to use")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace (default: the context's namespace)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "audit DaemonSets in every namespace")
	f.StringVarP(&o.output, "output", "o", "", "output format: (table), wide or json")
	f.BoolVar(&o.exitCode, "exit-code", false, "exit 1 when any DaemonSet has a gap")
	f.BoolVarP(&o.watch, "watch", "w", false, "audit again every --interval, tracking how long each gap has lasted")
	f.DurationVar(&o.interval, "interval", 15*time.Second, "time between audits with --watch")
	f.DurationVar(&o.window, "gap-window", 5*time.Minute, "a gap lasting longer than this is persistent")
	f.StringVar(&o.configFile, "config", "", "policy file (PolicyConfig YAML)")
	f.StringVar(&o.dsguardNamespace, "dsguard-namespace", "dsguard-system", "namespace of the dsguard-policy ConfigMap")
	return cmd
}

func runAudit(cmd *cobra.Command, o *auditOptions, name string) error {
	if o.output != "" && o.output != "wide" && o.output != "json" {
		return fmt.Errorf("unknown output format %q (want wide or json)", o.output)
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{CurrentContext: o.context})
	restConfig, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	namespace := o.namespace
	if namespace == "" && !o.allNamespaces {
		if namespace, _, err = loader.Namespace(); err != nil {
			return err
		}
	}
	if o.allNamespaces {
		namespace = ""
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pol, err := auditPolicy(ctx, c, o)
	if err != nil {
		return err
	}
	gaps := audit.GapClock{}
	for {
		entries, err := auditOnce(ctx, c, pol, namespace, name, gaps, o.window)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if o.watch && o.output != "json" {
			fmt.Fprintf(out, "\n%s\n", time.Now().Format(time.RFC3339))
		}
		if o.output == "json" {
			err = audit.WriteJSON(out, entries, true)
		} else {
			err = audit.WriteTable(out, entries, o.output == "wide")
		}
		if err != nil {
			return err
		}
		if !o.watch {
			if o.exitCode {
				for i := range entries {
					if entries[i].HasGap() {
						return exitError{code: 1}
					}
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.interval):
		}
	}
}

// auditPolicy loads the policy the cluster's dsguard enforces, so the audit
// judges live objects by the same rules.
func auditPolicy(ctx context.Context, c client.Client, o *auditOptions) (*policy.Policy, error) {
	if o.configFile != "" {
		data, err := os.ReadFile(o.configFile)
		if err != nil {
			return nil, err
		}
		p, err := rules.Builtin().Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.configFile, err)
		}
		return p, nil
	}
	var cm corev1.ConfigMap
	err := c.Get(ctx, types.NamespacedName{Namespace: o.dsguardNamespace, Name: "dsguard-policy"}, &cm)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return rules.Builtin().Default(), nil
	case err != nil:
		return nil, err
	}
	p, err := rules.Builtin().Parse([]byte(cm.Data["policy.yaml"]))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/dsguard-policy: %w", o.dsguardNamespace, err)
	}
	return p, nil
}

func auditOnce(ctx context.Context, c client.Client, pol *policy.Policy, namespace, name string,
	gaps audit.GapClock, window time.Duration) ([]audit.Entry, error) {
	var dsList appsv1.DaemonSetList
	if err := c.List(ctx, &dsList, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing DaemonSets: %w", err)
	}
	var nodeList corev1.NodeList
	if err := c.List(ctx, &nodeList); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(nodeList.Items))
	for i := range nodeList.Items {
		nodes[i] = &nodeList.Items[i]
	}
	snap := coverage.NewNodeSnapshot(nodes)
	var dss []*appsv1.DaemonSet
	for i := range dsList.Items {
		if name == "" || dsList.Items[i].Name == name {
			dss = append(dss, &dsList.Items[i])
		}
	}
	if name != "" && len(dss) == 0 {
		return nil, fmt.Errorf("DaemonSet %q not found in namespace %q", name, namespace)
	}
	now := time.Now()
	gaps.Observe(dss, now)
	entries := audit.Run(audit.Input{DaemonSets: dss, Nodes: snap, Policy: pol, Now: now, GapSince: gaps, Window: window})
	for i := range entries {
		if entries[i].Status.Gap > 0 {
			if err := audit.InvestigateGap(ctx, c, &entries[i], snap); err != nil {
				return nil, err
			}
		}
	}
	return entries, nil
}
