//go:build !offline

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/coverage"
)

// nodeChangeKind is what `dsguard taint` and `dsguard label` change.
type nodeChangeKind struct {
	use, what, example string
	// check refuses what kubectl refuses across the arguments, before the
	// node is read; apply then applies one argument to the node.
	check func(specs []string) error
	apply func(node *corev1.Node, spec string, overwrite bool) error
}

var (
	taintChange = nodeChangeKind{
		use: "taint NODE KEY[=VALUE]:EFFECT | KEY[=VALUE][:EFFECT]- ... [--overwrite]", what: "taints",
		example: "  kubectl dsguard taint infra-4 dedicated=infra:NoSchedule\n" +
			"  kubectl dsguard taint infra-4 dedicated=infra:NoExecute\n" +
			"  kubectl dsguard taint infra-4 dedicated=batch:NoSchedule --overwrite\n" +
			"  kubectl dsguard taint cp-1 node-role.kubernetes.io/control-plane:NoSchedule-",
		check: checkTaintArgs,
		apply: applyTaint,
	}
	labelChange = nodeChangeKind{
		use: "label NODE KEY=VALUE | KEY- ... [--overwrite]", what: "labels",
		example: "  kubectl dsguard label worker-7 pool=gpu\n  kubectl dsguard label worker-7 pool=cpu --overwrite\n" +
			"  kubectl dsguard label worker-7 pool-",
		check: checkLabelArgs,
		apply: applyLabel,
	}
)

func newNodeChangeCommand(kind nodeChangeKind) *cobra.Command {
	var output string
	var exitCode, overwrite bool
	cmd := &cobra.Command{
		Use:   kind.use,
		Short: "Say what changing a node's " + kind.what + " would do to the DaemonSets, without changing it",
		Long: "Applies the change to a copy of the node, in the arguments' syntax of kubectl " + strings.Fields(kind.use)[0] +
			", and says, for\nevery DaemonSet it alters, what the DaemonSet controller will do: a Pod deleted now (a selector that\n" +
			"no longer matches, an untolerated NoExecute taint), a Pod that keeps running until it is restarted and\n" +
			"then never comes back (an untolerated NoSchedule taint), no Pod there any more, or a Pod gained.\n" +
			"Nothing in the cluster is changed. --exit-code exits 1 when any DaemonSet loses the node.",
		Example: kind.example,
		Args:    cobra.MinimumNArgs(2),
	}
	flags := newClusterFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "output format: (text) or json")
	f.BoolVar(&exitCode, "exit-code", false, "exit 1 when any DaemonSet loses the node")
	f.BoolVar(&overwrite, "overwrite", false, "as kubectl's: let a change replace an existing "+strings.TrimSuffix(kind.what, "s")+
		" of the same key (and effect), which is refused otherwise")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if output != "" && output != "json" {
			return fmt.Errorf("unknown output format %q (want text or json)", output)
		}
		if err := kind.check(args[1:]); err != nil {
			return err
		}
		c, err := flags.client()
		if err != nil {
			return err
		}
		var node corev1.Node
		if err := c.Get(cmd.Context(), types.NamespacedName{Name: args[0]}, &node); err != nil {
			return fmt.Errorf("node %s: %w", args[0], err)
		}
		changed := node.DeepCopy()
		for _, spec := range args[1:] {
			if err := kind.apply(changed, spec, overwrite); err != nil {
				return err
			}
		}
		var dss appsv1.DaemonSetList
		if err := c.List(cmd.Context(), &dss); err != nil {
			return fmt.Errorf("listing DaemonSets: %w", err)
		}
		pods := &metav1.PartialObjectMetadataList{}
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := c.List(cmd.Context(), pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
			return fmt.Errorf("listing the Pods on %s: %w", node.Name, err)
		}
		r := judgeNodeChange(&node, changed, dss.Items, pods.Items)
		r.Change = strings.Join(args[1:], " ")
		if output == "json" {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			err = enc.Encode(r)
		} else {
			err = r.write(cmd.OutOrStdout(), kind.what)
		}
		if err != nil {
			return err
		}
		if exitCode && r.Loses() > 0 {
			return exitError{code: 1}
		}
		return nil
	}
	return cmd
}

// nodeChangeReport is what a node change does, DaemonSet by DaemonSet.
type nodeChangeReport struct {
	Node   string `json:"node"`
	Change string `json:"change"`
	// DaemonSets lists those the change alters, by namespace and name.
	DaemonSets []daemonSetImpact `json:"daemonSets"`
	// Unaffected counts the others.
	Unaffected int `json:"unaffected"`
}

type daemonSetImpact struct {
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Impact    coverage.Impact `json:"impact"`
	Why       string          `json:"why"`
}

// Loses counts the DaemonSets that lose the node, now or on restart.
func (r *nodeChangeReport) Loses() int {
	n := 0
	for _, d := range r.DaemonSets {
		if (coverage.NodeImpact{Impact: d.Impact}).Loses() {
			n++
		}
	}
	return n
}

// judgeNodeChange judges every DaemonSet on the node before and after the
// change; pods are the Pods bound to the node.
func judgeNodeChange(before, after *corev1.Node, dss []appsv1.DaemonSet, pods []metav1.PartialObjectMetadata) *nodeChangeReport {
	withPod := coverage.DaemonSetsWithPod(pods)
	r := &nodeChangeReport{Node: before.Name, DaemonSets: []daemonSetImpact{}}
	for i := range dss {
		ds := &dss[i]
		im := coverage.ImpactOf(ds, before, after, withPod[types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}])
		if im.Impact == coverage.ImpactNone {
			r.Unaffected++
			continue
		}
		r.DaemonSets = append(r.DaemonSets, daemonSetImpact{Namespace: ds.Namespace, Name: ds.Name, Impact: im.Impact,
			Why: im.Why(before.Name)})
	}
	slices.SortFunc(r.DaemonSets, func(a, b daemonSetImpact) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return r
}

func (r *nodeChangeReport) write(w io.Writer, what string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on node %s: %s (nothing was changed)\n", what, r.Node, r.Change)
	for _, d := range r.DaemonSets {
		fmt.Fprintf(&b, "  %s/%s %s\n", d.Namespace, d.Name, d.Why)
	}
	fmt.Fprintf(&b, "DaemonSets losing %s: %d, gaining it: %d, unaffected: %d\n", r.Node, r.Loses(), len(r.DaemonSets)-r.Loses(), r.Unaffected)
	_, err := io.WriteString(w, b.String())
	return err
}

// parseTaint parses one argument of kubectl taint as kubectl does:
// KEY[=VALUE]:EFFECT adds; KEY[=VALUE]:EFFECT- and KEY- remove (remove is
// true), the value checked but not matched. What kubectl refuses as an
// invalid taint spec (KEY=VALUE- among them) is refused here too, with why.
func parseTaint(spec string) (t corev1.Taint, remove bool, err error) {
	body, remove := strings.CutSuffix(spec, "-")
	switch parts := strings.Split(body, ":"); len(parts) {
	case 1:
		if !remove {
			return t, false, fmt.Errorf("taint %q: want KEY[=VALUE]:EFFECT or KEY[:EFFECT]-", spec)
		}
		t.Key = body
	case 2:
		switch t.Effect = corev1.TaintEffect(parts[1]); t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return t, false, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", spec, t.Effect)
		}
		kv := strings.Split(parts[0], "=")
		if len(kv) > 2 {
			return t, false, fmt.Errorf("taint %q: want KEY[=VALUE]:EFFECT or KEY[:EFFECT]-", spec)
		}
		t.Key = kv[0]
		if len(kv) == 2 {
			t.Value = kv[1]
		}
	default:
		return t, false, fmt.Errorf("taint %q: want KEY[=VALUE]:EFFECT or KEY[:EFFECT]-", spec)
	}
	if err := validKeyValue(t.Key, t.Value); err != nil {
		return t, false, fmt.Errorf("taint %q: %w", spec, err)
	}
	if remove {
		t.Value = ""
	}
	return t, remove, nil
}

// checkTaintArgs refuses what kubectl taint refuses across its arguments
// before it reads the node: one key and effect added twice, or a taint
// both added and removed.
func checkTaintArgs(specs []string) error {
	var add, remove []corev1.Taint
	for _, spec := range specs {
		t, rm, err := parseTaint(spec)
		if err != nil {
			return err
		}
		if rm {
			remove = append(remove, t)
			continue
		}
		if slices.ContainsFunc(add, func(o corev1.Taint) bool { return o.MatchTaint(&t) }) {
			return fmt.Errorf("duplicated taints with the same key and effect: %s", t.ToString())
		}
		add = append(add, t)
	}
	for _, a := range add {
		for _, r := range remove {
			if a.Key == r.Key && (r.Effect == "" || r.Effect == a.Effect) {
				return fmt.Errorf("can not both modify and remove taint %s in the same command", r.ToString())
			}
		}
	}
	return nil
}

// applyTaint applies one argument of kubectl taint (parseTaint): an added
// taint replaces the node's of the same key and effect only with
// overwrite, as kubectl refuses otherwise, whatever the value; a removal
// takes the taint of that key and effect, or every taint of the key.
func applyTaint(node *corev1.Node, spec string, overwrite bool) error {
	t, remove, err := parseTaint(spec)
	if err != nil {
		return err
	}
	if remove {
		n := len(node.Spec.Taints)
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(o corev1.Taint) bool {
			return o.Key == t.Key && (t.Effect == "" || o.Effect == t.Effect)
		})
		if len(node.Spec.Taints) == n {
			return fmt.Errorf("taint %q not found on node %s", spec, node.Name)
		}
		return nil
	}
	if !overwrite && slices.ContainsFunc(node.Spec.Taints, func(o corev1.Taint) bool { return o.MatchTaint(&t) }) {
		return fmt.Errorf("node %s already has a taint %s with effect %s, and --overwrite is false", node.Name, t.Key, t.Effect)
	}
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(o corev1.Taint) bool { return o.MatchTaint(&t) })
	node.Spec.Taints = append(node.Spec.Taints, t)
	return nil
}

// validKeyValue checks a taint's or label's key and value as the API server
// and kubectl do (a qualified name; a label value), so that a bad one is
// refused here with the reason, before any DaemonSet is judged against it.
func validKeyValue(key, value string) error {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("key %q: %s", key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return fmt.Errorf("value %q: %s", value, strings.Join(errs, "; "))
	}
	return nil
}

// checkLabelArgs refuses what kubectl label refuses across its arguments
// before it reads the node: a label both set and removed.
func checkLabelArgs(specs []string) error {
	set := map[string]bool{}
	for _, spec := range specs {
		if key, value, ok := strings.Cut(spec, "="); ok && !strings.Contains(value, "=") {
			set[key] = true
		}
	}
	for _, spec := range specs {
		if key, ok := strings.CutSuffix(spec, "-"); ok && !strings.Contains(key, "=") && set[key] {
			return fmt.Errorf("can not both modify and remove label %s in the same command", key)
		}
	}
	return nil
}

// applyLabel applies one argument of kubectl label: KEY=VALUE sets (a new
// value for an existing label only with overwrite, as kubectl refuses
// otherwise), KEY- removes.
func applyLabel(node *corev1.Node, spec string, overwrite bool) error {
	if key, ok := strings.CutSuffix(spec, "-"); ok && !strings.Contains(key, "=") {
		if _, has := node.Labels[key]; !has {
			return fmt.Errorf("label %q not found on node %s", key, node.Name)
		}
		delete(node.Labels, key)
		return nil
	}
	key, value, ok := strings.Cut(spec, "=")
	if !ok || key == "" {
		return fmt.Errorf("label %q: want KEY=VALUE or KEY-", spec)
	}
	if err := validKeyValue(key, value); err != nil {
		return fmt.Errorf("label %q: %w", spec, err)
	}
	if current, has := node.Labels[key]; has && current != value && !overwrite {
		return fmt.Errorf("label %q already has a value (%s) on node %s, and --overwrite is false", key, current, node.Name)
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[key] = value
	return nil
}
