//go:build !offline

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/audit"
	"github.com/dsguard/dsguard/check"
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/coveragemap"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

type auditOptions struct {
	cluster          *clusterFlags
	allNamespaces    bool
	selector         string
	output           string
	poolLabel        string
	noHeaders        bool
	exitCode         bool
	watch            bool
	interval, window time.Duration
	configFile       string
	dsguardNamespace string
	fit              bool
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
			"node by node why there is no ready Pod. -o wide prints those details and where each DaemonSet runs,\n" +
			"with every skipped node by reason; -o json and -o yaml everything; -o name, -o jsonpath=... and\n" +
			"-o go-template=... as kubectl prints them; -o html one self-contained page, a coverage map of node\n" +
			"groups against DaemonSets (covered, Pending, skipped and why, misscheduled), and -o markdown the\n" +
			"same as a table for a pull request.\n\n" +
			"The cluster is reached with kubectl's flags (--kubeconfig, --context, --as, --token, --server,\n" +
			"--request-timeout, ...). The policy is --config, else the dsguard-policy ConfigMap in\n" +
			"--dsguard-namespace, else the defaults.",
		Example: "  dsguard audit -A\n" +
			"  kubectl dsguard audit -n monitoring node-exporter -o wide\n" +
			"  dsguard audit -A -l app.kubernetes.io/part-of=observability --no-headers\n" +
			"  dsguard audit -A -o jsonpath='{.items[?(@.hasGap)].name}'\n" +
			"  dsguard audit -A --exit-code   # for scripts: 1 on any gap",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return runAudit(cmd, &o, name)
		},
	}
	o.cluster = newClusterFlags(cmd)
	cmd.ValidArgsFunction = o.cluster.completeDaemonSets
	f := cmd.Flags()
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "audit DaemonSets in every namespace")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector of the DaemonSets to audit (e.g. -l app=node-exporter)")
	f.StringVarP(&o.output, "output", "o", "", "output format: (table), wide, json, yaml, name, jsonpath=..., go-template=..., html (a coverage map page) or markdown")
	f.StringVar(&o.poolLabel, "pool-label", "", "node label that names pools in -o html and markdown (default: the first of "+strings.Join(coveragemap.PoolLabels, ", ")+", else the node's role)")
	f.BoolVar(&o.noHeaders, "no-headers", false, "print the table without its header line")
	f.BoolVar(&o.exitCode, "exit-code", false, "exit 1 when any DaemonSet has a gap")
	f.BoolVarP(&o.watch, "watch", "w", false, "audit again every --interval, tracking how long each gap has lasted")
	f.DurationVar(&o.interval, "interval", 15*time.Second, "time between audits with --watch")
	f.DurationVar(&o.window, "gap-window", 5*time.Minute, "a gap lasting longer than this is persistent")
	f.StringVar(&o.configFile, "config", "", policyFileUsage+"; without it, the cluster's dsguard-policy ConfigMap")
	f.StringVar(&o.dsguardNamespace, "dsguard-namespace", "dsguard-system", "namespace of the dsguard-policy ConfigMap")
	f.BoolVar(&o.fit, "fit", true, "read the cluster's Pods, PriorityClasses and Namespaces to predict whether each DaemonSet's "+
		"Pods land on the nodes they cover (rules resource-fit and priority-class); --fit=false on clusters too large to list every Pod")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("wide", "json", "yaml", "name", "jsonpath=", "go-template=", "html", "markdown"))
	return cmd
}

func runAudit(cmd *cobra.Command, o *auditOptions, name string) error {
	_, isMap := mapFormats[o.output]
	if o.output != "" && o.output != "wide" && !isMap && !printerFormat(o.output) {
		return fmt.Errorf("unknown output format %q (want wide, json, yaml, name, jsonpath=..., go-template=..., html or markdown)", o.output)
	}
	if isMap && o.watch {
		return fmt.Errorf("-o %s writes one map; it does not combine with --watch", o.output)
	}
	var sel labels.Selector
	if o.selector != "" {
		var err error
		if sel, err = labels.Parse(o.selector); err != nil {
			return fmt.Errorf("-l %s: %w", o.selector, err)
		}
	}
	c, err := o.cluster.client()
	if err != nil {
		return err
	}
	namespace := ""
	if !o.allNamespaces {
		if namespace, err = o.cluster.namespace(); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pol, err := auditPolicy(ctx, c, o)
	if err != nil {
		return err
	}
	gaps := audit.GapClock{}
	for {
		pass, err := auditOnce(ctx, c, pol, namespace, name, sel, gaps, o)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if o.watch && (o.output == "" || o.output == "wide") {
			fmt.Fprintf(out, "\n%s\n", time.Now().Format(time.RFC3339))
		}
		if isMap {
			err = writeAuditMap(ctx, out, c, o, namespace, pass)
		} else {
			err = writeAudit(out, o, pass)
		}
		if err != nil {
			return err
		}
		if !o.watch {
			if o.exitCode {
				for i := range pass.entries {
					if pass.entries[i].HasGap() {
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

// auditPass is one audit's entries and the nodes they were judged on.
type auditPass struct {
	entries []audit.Entry
	snap    *coverage.NodeSnapshot
	// nodeList holds the nodes in the API server's order.
	nodeList []*corev1.Node
}

// placements describes where each audited DaemonSet runs.
func (p *auditPass) placements() []*coverage.Placement {
	out := make([]*coverage.Placement, len(p.entries))
	for i := range p.entries {
		out[i] = coverage.NewPlacement(p.entries[i].DaemonSet, &p.entries[i].Coverage, p.snap)
	}
	return out
}

// writeAudit prints one pass in the -o format.
func writeAudit(w io.Writer, o *auditOptions, pass *auditPass) error {
	switch o.output {
	case "", "wide":
		if err := audit.WriteTable(w, pass.entries, o.output == "wide", o.noHeaders); err != nil {
			return err
		}
		if o.output == "wide" {
			return writeAuditPlacements(w, pass)
		}
		return nil
	case "name":
		// kubectl's name printer prints objects, not Lists: one per DaemonSet.
		for i := range pass.entries {
			ds := pass.entries[i].DaemonSet.DeepCopy()
			ds.APIVersion, ds.Kind = "apps/v1", "DaemonSet"
			if err := printObject(w, o.output, ds); err != nil {
				return err
			}
		}
		return nil
	}
	// json, yaml, jsonpath, templates: the AuditReport document with each
	// item's placement, through kubectl's printers.
	obj, err := toUnstructured(func(buf io.Writer) error { return audit.WriteJSON(buf, pass.entries, true) })
	if err != nil {
		return err
	}
	items, _ := obj.Object["items"].([]any)
	for i, p := range pass.placements() {
		if i >= len(items) {
			break
		}
		item, ok := items[i].(map[string]any)
		if !ok {
			continue
		}
		pj, err := toUnstructured(func(buf io.Writer) error { return json.NewEncoder(buf).Encode(p) })
		if err != nil {
			return err
		}
		item["placement"] = pj.Object
	}
	return printObject(w, o.output, obj)
}

// writeAuditPlacements prints, below the wide table, where each DaemonSet
// runs and why it skips every other node, and whether a new Pod lands on
// each node it covers.
func writeAuditPlacements(w io.Writer, pass *auditPass) error {
	var b strings.Builder
	for i, p := range pass.placements() {
		fmt.Fprintf(&b, "\n%s placement:\n", pass.entries[i].Key())
		check.WritePlacement(&b, p, "  ")
		if r := pass.entries[i].Fit; r != nil {
			check.WriteFit(&b, r, "  ")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// auditPolicy loads the policy the cluster's dsguard enforces, so the audit
// judges live objects by the same rules.
func auditPolicy(ctx context.Context, c client.Client, o *auditOptions) (*policy.Policy, error) {
	if o.configFile != "" {
		return loadPolicy(o.configFile, "policy.yaml", os.Stdin)
	}
	var cm corev1.ConfigMap
	err := c.Get(ctx, types.NamespacedName{Namespace: o.dsguardNamespace, Name: "dsguard-policy"}, &cm)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		// Said loudly: judging with the defaults may differ from what the
		// cluster's dsguard enforces.
		fmt.Fprintf(os.Stderr, "WARNING: no policy read from ConfigMap %s/dsguard-policy (%v): judging with dsguard's "+
			"built-in default policy, which may differ from the cluster's; pass --config (a PolicyConfig, the ConfigMap "+
			"or the chart's values) or --dsguard-namespace\n", o.dsguardNamespace, err)
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

func auditOnce(ctx context.Context, c client.Client, pol *policy.Policy, namespace, name string, sel labels.Selector,
	gaps audit.GapClock, o *auditOptions) (*auditPass, error) {
	prog := newProgress(os.Stderr)
	defer prog.done()
	opts := []client.ListOption{client.InNamespace(namespace)}
	if sel != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	var dss []*appsv1.DaemonSet
	if err := listEach(ctx, c, func() client.ObjectList { return &appsv1.DaemonSetList{} }, func(ds *appsv1.DaemonSet) error {
		if name == "" || ds.Name == name {
			dss = append(dss, ds)
		}
		prog.say("listed %d DaemonSets", len(dss))
		return nil
	}, opts...); err != nil {
		return nil, fmt.Errorf("listing DaemonSets: %w", err)
	}
	var nodes []*corev1.Node
	if err := listEach(ctx, c, func() client.ObjectList { return &corev1.NodeList{} }, func(n *corev1.Node) error {
		nodes = append(nodes, n)
		prog.say("listed %d DaemonSets, %d nodes", len(dss), len(nodes))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	snap := coverage.NewNodeSnapshot(nodes)
	if name != "" && len(dss) == 0 {
		return nil, fmt.Errorf("DaemonSet %q not found in namespace %q", name, namespace)
	}
	now := time.Now()
	gaps.Observe(dss, now)
	var cluster *fit.Cluster
	if o.fit {
		var err error
		if cluster, err = readFitCluster(ctx, c, nodes, prog); err != nil {
			return nil, err
		}
	}
	prog.say("judging %d DaemonSets on %d nodes", len(dss), len(nodes))
	entries := audit.Run(audit.Input{DaemonSets: dss, Nodes: snap, Policy: pol, Now: now, GapSince: gaps, Window: o.window, Fit: cluster})
	gapped := 0
	for i := range entries {
		if entries[i].Status.Gap > 0 {
			gapped++
		}
	}
	investigated := 0
	for i := range entries {
		if entries[i].Status.Gap > 0 {
			investigated++
			prog.say("investigating the gaps of %d DaemonSets node by node (%d/%d: %s/%s)", gapped, investigated, gapped,
				entries[i].DaemonSet.Namespace, entries[i].DaemonSet.Name)
			if err := audit.InvestigateGap(ctx, c, &entries[i], snap); err != nil {
				return nil, err
			}
		}
	}
	return &auditPass{entries: entries, snap: snap, nodeList: nodes}, nil
}

// readFitCluster lists what the scheduler weighs: the Pods (reduced as they
// are added), PriorityClasses and Namespaces. A user who may not list them
// gets the audit without fit, and a note on stderr.
func readFitCluster(ctx context.Context, c client.Client, nodes []*corev1.Node, prog *progress) (*fit.Cluster, error) {
	b := fit.NewBuilder()
	for _, n := range nodes {
		b.AddNode(n)
	}
	// Each Pod is reduced to its record as its page arrives: the whole
	// PodList of a large cluster is never held.
	pods := 0
	lists := []struct {
		what string
		list func() error
	}{
		{"Pods", func() error {
			return listEach(ctx, c, func() client.ObjectList { return &corev1.PodList{} }, func(p *corev1.Pod) error {
				pods++
				prog.say("listed %d nodes, %d Pods", len(nodes), pods)
				return b.AddPod(p)
			})
		}},
		{"PriorityClasses", func() error {
			return listEach(ctx, c, func() client.ObjectList { return &schedulingv1.PriorityClassList{} }, func(pc *schedulingv1.PriorityClass) error {
				b.AddPriorityClass(pc)
				return nil
			})
		}},
		{"Namespaces", func() error {
			return listEach(ctx, c, func() client.ObjectList { return &corev1.NamespaceList{} }, func(ns *corev1.Namespace) error {
				b.AddNamespace(ns)
				return nil
			})
		}},
	}
	for _, l := range lists {
		if err := l.list(); err != nil {
			if apierrors.IsForbidden(err) {
				prog.done()
				fmt.Fprintf(os.Stderr, "note: cannot list %s (%v): resource-fit and priority-class left out; --fit=false says it is meant\n", l.what, err)
				return nil, nil
			}
			return nil, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	return b.Build(), nil
}
