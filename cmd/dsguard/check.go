package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dsguard/dsguard/check"
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/coveragemap"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/manifest"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/dsguard/dsguard/render"
)

// checkFormats are the -o values of check, each a Writer that writes every
// DaemonSet as it is judged, so memory follows the largest document.
var checkFormats = map[string]func(w io.Writer, failOn policy.Action) check.Writer{
	"text":   func(w io.Writer, _ policy.Action) check.Writer { return check.NewTextWriter(w, false) },
	"wide":   func(w io.Writer, _ policy.Action) check.Writer { return check.NewTextWriter(w, true) },
	"github": func(w io.Writer, _ policy.Action) check.Writer { return check.NewGitHubWriter(w) },
	"json":   func(w io.Writer, _ policy.Action) check.Writer { return check.NewJSONWriter(w) },
	"junit":  func(w io.Writer, failOn policy.Action) check.Writer { return check.NewJUnitWriter(w, failOn) },
	"sarif": func(w io.Writer, _ policy.Action) check.Writer {
		return check.NewSARIFWriter(w, check.Tool{Version: versionString(), Rules: rules.Builtin().Rules()})
	},
}

// checkMemoryLimit is the soft limit of check's Go memory with --nodes:
// with the binary's own pages (about 45 MiB) it keeps the process within
// the 256 MiB that a CI runner's small container gives a step.
const checkMemoryLimit = 176 << 20

type checkOptions struct {
	files         []string
	configFile    string
	outputs       []string
	outputFile    string
	poolLabel     string
	namespace     string
	nodesFile     string
	previousFile  string
	previousNodes string
	failOn        string
	allowEmpty    bool
	render        render.Options
}

func newCheckCommand() *cobra.Command {
	o := checkOptions{}
	cmd := &cobra.Command{
		Use:   "check [PATH...]",
		Short: "Check DaemonSet manifests, Helm charts and kustomizations offline, with the webhook's verdicts",
		Long: "Check reads manifests (files; directories, recursively; - for stdin; multi-document YAML, JSON and\n" +
			"List objects), renders Helm charts (a directory with Chart.yaml, with --values and --set) and\n" +
			"kustomizations (a directory with kustomization.yaml) in process, and evaluates every apps/v1\n" +
			"DaemonSet against the policy. Other Kubernetes objects are counted; YAML that is not a Kubernetes\n" +
			"object (Helm values, CI configuration) is skipped with a note. With --nodes it also predicts where\n" +
			"each DaemonSet will run: -o wide and -o json list those nodes and every skipped node by reason.\n\n" +
			"Exit status: 0 nothing fails; 1 a DaemonSet is denied (or, with --fail-on warn, warned);\n" +
			"2 usage, policy or input error: a path that cannot be read, a document that cannot be decoded,\n" +
			"a DaemonSet the API server would refuse, or no Kubernetes object at all.",
		Example: "  dsguard check manifests/\n" +
			"  dsguard check charts/agent --values prod-values.yaml --set image.tag=v2\n" +
			"  dsguard check deploy/overlays/production -o sarif > dsguard.sarif\n" +
			"  helm template ./chart | dsguard check - -o json\n" +
			"  dsguard nodes > nodes.yaml && dsguard check ds.yaml --nodes nodes.yaml -o wide",
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheck(cmd, &o, append(append([]string{}, o.files...), args...))
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.files, "filename", "f", nil, "manifest file, directory (recursive), chart, kustomization or - for stdin; repeatable (paths may also be given as arguments)")
	f.StringVar(&o.configFile, "config", "", policyFileUsage)
	f.StringArrayVarP(&o.outputs, "output", "o", []string{"text"}, "output format: text, wide (with each DaemonSet's placement), json, sarif, junit, github, or with --nodes html (a coverage map page) or markdown; "+
		"repeatable, as FORMAT=FILE to write a format to a file (-o github -o sarif=dsguard.sarif: one run, both reports)")
	f.StringVar(&o.outputFile, "output-file", "", "write the report of the -o given without a file here instead of stdout")
	f.StringVar(&o.poolLabel, "pool-label", "", "node label that names pools in -o html and markdown (default: the first of "+strings.Join(coveragemap.PoolLabels, ", ")+", else the node's role)")
	f.StringVarP(&o.namespace, "namespace", "n", "default", "namespace assumed for DaemonSets that name none (and a chart's release namespace)")
	f.StringVar(&o.nodesFile, "nodes", "", "node set to predict coverage against (dsguard nodes, or kubectl get nodes -o yaml); node rules are skipped without it")
	f.StringVar(&o.previousNodes, "previous-nodes", "", "with -o markdown and --nodes: the node set before (same forms as --nodes); the table then says how each DaemonSet's coverage changes from it to --nodes")
	f.StringVar(&o.previousFile, "previous", "", "the DaemonSets as they stand in the cluster (kubectl get ds -A -o yaml, status included): each DaemonSet checked is judged as an update of its namesake, and rollout-impact says what the change will do")
	f.BoolVar(&o.allowEmpty, "allow-empty", false, "exit 0 when the input holds no Kubernetes object (for hooks handed whatever files changed)")
	f.StringVar(&o.failOn, "fail-on", "deny", "weakest verdict that fails the check (exit 1): deny or warn")
	f.StringArrayVar(&o.render.ValuesFiles, "values", nil, "Helm values file for the charts checked; repeatable, later files win")
	f.StringArrayVar(&o.render.Set, "set", nil, "Helm value for the charts checked (key=value, as helm --set); repeatable")
	f.StringVar(&o.render.ReleaseName, "release-name", "", "Helm release name for the charts checked (default release-name, as helm template)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("text", "wide", "json", "sarif", "junit", "github", "html", "markdown"))
	_ = cmd.RegisterFlagCompletionFunc("fail-on", fixedCompletion("deny", "warn"))
	return cmd
}

func runCheck(cmd *cobra.Command, o *checkOptions, paths []string) (retErr error) {
	if len(paths) == 0 {
		return fmt.Errorf("no input: give one or more paths (or - for stdin)")
	}
	outputs, err := parseOutputs(o.outputs, o.outputFile)
	if err != nil {
		return err
	}
	for _, out := range outputs {
		if _, isMap := mapFormats[out.format]; isMap && o.nodesFile == "" {
			return fmt.Errorf("-o %s maps DaemonSets against nodes: give the node set with --nodes", out.format)
		}
	}
	failOn := policy.Action(o.failOn)
	if failOn != policy.ActionDeny && failOn != policy.ActionWarn {
		return fmt.Errorf("unknown --fail-on %q (want deny or warn)", o.failOn)
	}
	pol, err := loadPolicy(o.configFile, "policy.yaml", cmd.InOrStdin())
	if err != nil {
		return err
	}
	in := check.Input{
		Paths: paths, Stdin: cmd.InOrStdin(), Namespace: o.namespace, FailOn: failOn,
		Env: policy.Env{Policy: pol, Now: time.Now()},
	}
	o.render.Namespace = o.namespace
	in.Render = render.Renderer{Options: o.render}
	if o.previousFile != "" {
		if in.Previous, err = readPrevious(o.previousFile, o.namespace, cmd.InOrStdin()); err != nil {
			return err
		}
		if note := statuslessNote(o.previousFile, in.Previous); note != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), note)
		}
	}
	if o.nodesFile != "" {
		// A dump's records are most of what check keeps, and decoding it
		// makes garbage fast. A soft limit on the Go heap holds the peak
		// of a big dump near its records (the collector works harder as
		// the heap nears it), while a small one is collected at the
		// default pace instead of every few megabytes (GOMEMLIMIT set in
		// the environment wins).
		if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
			debug.SetMemoryLimit(checkMemoryLimit)
		}
		nodes, err := readNodes(o.nodesFile, cmd.InOrStdin())
		if err != nil {
			return err
		}
		nodes.apply(&in)
	}
	var writers check.Tee
	for _, out := range outputs {
		dst := cmd.OutOrStdout()
		if out.file != "" {
			f, ferr := os.Create(out.file)
			if ferr != nil {
				return fmt.Errorf("-o %s=%s: %w", out.format, out.file, ferr)
			}
			// Closed when the run ends; a failed close (a full disk) is
			// the command's error.
			defer func() {
				if cerr := f.Close(); cerr != nil && retErr == nil {
					retErr = fmt.Errorf("-o %s=%s: %w", out.format, out.file, cerr)
				}
			}()
			dst = f
		}
		w, err := o.writer(cmd, out.format, dst, failOn, paths, in)
		if err != nil {
			return err
		}
		if c, ok := w.(io.Closer); ok {
			// A writer that holds a temporary file lets it go even when
			// the run ends before Finish.
			defer c.Close()
		}
		writers = append(writers, w)
	}
	var w check.Writer = writers
	if len(writers) == 1 {
		w = writers[0]
	}
	in.Stream = w.Result
	rep, err := check.Run(in)
	if errors.Is(err, check.ErrNoInput) && o.allowEmpty {
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "note: %v\n", err)
		return err
	}
	if err != nil {
		if rep != nil {
			// Output has begun: end it, saying the run stopped, so that
			// what was written stays readable; the error is still the
			// command's.
			if ferr := w.Finish(rep); ferr != nil {
				return errors.Join(err, ferr)
			}
		}
		return err
	}
	if err := w.Finish(rep); err != nil {
		return err
	}
	if code := rep.ExitCode(); code != check.ExitOK {
		return exitError{code: code}
	}
	return nil
}

// output is one report of a run: a format, written to a file or (no
// file) to stdout.
type output struct{ format, file string }

// parseOutputs reads the -o values (FORMAT or FORMAT=FILE) and
// --output-file: one report at most goes to stdout, and no two to one file.
func parseOutputs(specs []string, outputFile string) ([]output, error) {
	if len(specs) == 0 {
		specs = []string{"text"}
	}
	var outs []output
	toStdout := 0
	files := map[string]bool{}
	for _, spec := range specs {
		format, file, hasFile := strings.Cut(spec, "=")
		if _, ok := checkFormats[format]; !ok {
			if _, isMap := mapFormats[format]; !isMap {
				return nil, fmt.Errorf("unknown output format %q (want text, wide, json, sarif, junit, github, html or markdown, each optionally =FILE)", format)
			}
		}
		if hasFile && file == "" {
			return nil, fmt.Errorf("-o %s: no file after '='", spec)
		}
		if !hasFile {
			toStdout++
			file = outputFile
		}
		if file != "" {
			if files[file] {
				return nil, fmt.Errorf("two reports would be written to %s", file)
			}
			files[file] = true
		}
		outs = append(outs, output{format: format, file: file})
	}
	switch {
	case toStdout > 1:
		return nil, fmt.Errorf("%d -o formats without a file: one report at most goes to stdout (--output-file), give the others one (-o sarif=dsguard.sarif)", toStdout)
	case outputFile != "" && toStdout == 0:
		return nil, fmt.Errorf("--output-file names the file of the -o given without one, and every -o has its own")
	}
	return outs, nil
}

// writer returns the Writer of one report.
func (o *checkOptions) writer(cmd *cobra.Command, format string, w io.Writer, failOn policy.Action, paths []string, in check.Input) (check.Writer, error) {
	writeMap, isMap := mapFormats[format]
	if !isMap {
		return checkFormats[format](w, failOn), nil
	}
	m := &mapWriter{w: w, write: writeMap, in: coveragemap.Input{PoolLabel: o.poolLabel, Title: strings.Join(paths, " "), Nodes: in.Env.Nodes.All()}}
	var err error
	m.before, err = o.mapBefore(cmd, in, format)
	return m, err
}

// mapBefore is what -o markdown compares the manifests' coverage with:
// the same manifests on the --previous-nodes node set, or the --previous
// DaemonSets on the same nodes; nil for neither.
func (o *checkOptions) mapBefore(cmd *cobra.Command, in check.Input, format string) (func(after *coveragemap.Map) (*coveragemap.Map, error), error) {
	switch {
	case o.previousNodes != "" && format != "markdown":
		return nil, fmt.Errorf("--previous-nodes compares two node sets in -o markdown only")
	case o.previousNodes != "":
		old, err := readNodes(o.previousNodes, cmd.InOrStdin())
		if err != nil {
			return nil, err
		}
		return func(after *coveragemap.Map) (*coveragemap.Map, error) {
			after.Title = o.nodesFile
			// The same manifests judged again on the old nodes, quietly:
			// only their placements are kept.
			again := &mapWriter{in: coveragemap.Input{Nodes: old.snap.All(), PoolLabel: o.poolLabel, Title: o.previousNodes}}
			in.Env.Nodes, in.Env.Fit, in.Stream, in.TaintTimes = old.snap, nil, again.Result, old.taintTimes
			if _, err := check.Run(in); err != nil {
				return nil, fmt.Errorf("--previous-nodes: %w", err)
			}
			return coveragemap.Build(again.in), nil
		}, nil
	case o.previousFile != "" && format == "markdown":
		return func(after *coveragemap.Map) (*coveragemap.Map, error) {
			// Only the DaemonSets the manifests change; the file may hold
			// the whole cluster's.
			var dss []*appsv1.DaemonSet
			for _, a := range after.Agents {
				if ds, ok := in.Previous[a.Key()]; ok {
					dss = append(dss, ds)
				}
			}
			return coveragemap.Build(coveragemap.Input{Nodes: in.Env.Nodes.All(), PoolLabel: o.poolLabel, Title: o.previousFile,
				Agents: predictedAgents(dss, in.Env.Nodes)}), nil
		}, nil
	}
	return nil, nil
}

// readPrevious reads --previous: the DaemonSets as stored, by
// namespace/name (namespace, when they name none).
func readPrevious(file, namespace string, stdin io.Reader) (map[string]*appsv1.DaemonSet, error) {
	out := map[string]*appsv1.DaemonSet{}
	rd := &manifest.Reader{Stdin: stdin, OnDaemonSet: func(d manifest.DaemonSet) {
		ds := d.DaemonSet
		if ds.Namespace == "" {
			ds.Namespace = namespace
		}
		out[ds.Namespace+"/"+ds.Name] = ds
	}}
	if err := rd.Load([]string{file}); err != nil {
		return nil, fmt.Errorf("--previous: %w", err)
	}
	if len(rd.Errors) > 0 {
		return nil, fmt.Errorf("--previous: %s", rd.Errors[0])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--previous: %s holds no DaemonSet (want the output of kubectl get daemonsets -A -o yaml)", file)
	}
	return out, nil
}

// statuslessNote says which DaemonSets of --previous carry no status, and
// what that costs: rollout-impact counts the Pods a template change
// replaces from the stored status, so without one it has nothing to say
// and would otherwise say nothing without a word.
func statuslessNote(file string, previous map[string]*appsv1.DaemonSet) string {
	var bare []string
	for _, key := range slices.Sorted(maps.Keys(previous)) {
		st := &previous[key].Status
		if st.ObservedGeneration == 0 && st.DesiredNumberScheduled == 0 && st.CurrentNumberScheduled == 0 {
			bare = append(bare, key)
		}
	}
	if len(bare) == 0 {
		return ""
	}
	names := strings.Join(bare, ", ")
	if len(bare) > 5 {
		names = fmt.Sprintf("%s and %d more", strings.Join(bare[:5], ", "), len(bare)-5)
	}
	return fmt.Sprintf("note: --previous %s: %d of %d DaemonSets carry no status (%s). rollout-impact counts the nodes a "+
		"template change restarts from status.currentNumberScheduled and desiredNumberScheduled, so it gives no figures "+
		"for these; give the DaemonSets as the cluster stores them: kubectl get daemonsets -A -o yaml",
		file, len(bare), len(previous), names)
}

// nodeInput is what --nodes gave: the nodes, and what the scheduler weighs
// when the file is a cluster dump with Pods.
type nodeInput struct {
	snap    *coverage.NodeSnapshot
	fit     *fit.Cluster
	fitNote string
	// daemonSets are the dump's DaemonSets (kubectl get ...,daemonsets).
	daemonSets []*appsv1.DaemonSet
	// taintTimes are when the nodes got the taints that say.
	taintTimes coverage.TaintTimes
}

// readNodes reads a node set file: dsguard nodes' output, kubectl get nodes
// -o yaml, or a cluster dump (kubectl get nodes,pods,priorityclasses,
// namespaces -A -o yaml), whose Pods are reduced to what the scheduler
// weighs as they are read. Each node is kept as its name and the label map
// and taints it shares with the nodes alike, so that a dump of tens of
// thousands of nodes costs about what their names do.
func readNodes(file string, stdin io.Reader) (*nodeInput, error) {
	var in nodeInput
	b := fit.NewBuilder()
	var podErr error
	pods := 0
	var records []coverage.NodeRecord
	in.taintTimes = coverage.TaintTimes{}
	// The lifecycle taints the dump's NodePools and NodeReadinessRules
	// declare, which predictions on its nodes mark as such.
	var declared []coverage.LifecycleTaint
	var declErr error
	rd := &manifest.Reader{
		Stdin: stdin,
		OnNode: func(n *corev1.Node) {
			// The label map is the one the fit Builder shares between
			// nodes alike; the records live until the snapshot is built.
			f := b.AddNode(n)
			records = append(records, coverage.NodeRecord{Name: f.Name, Labels: f.Labels, Hostname: f.Hostname, Taints: n.Spec.Taints})
			in.taintTimes.Add(f.Name, n.Spec.Taints)
		},
		DeclaresTaints: coverage.DeclaresLifecycleTaints,
		OnTaintDeclaration: func(obj *unstructured.Unstructured) {
			taints, err := coverage.DeclaredLifecycleTaints(obj)
			if err != nil && declErr == nil {
				declErr = err
			}
			declared = append(declared, taints...)
		},
		OnPod: func(p *corev1.Pod) {
			pods++
			if err := b.AddPod(p); err != nil && podErr == nil {
				podErr = err
			}
		},
		OnPriorityClass: b.AddPriorityClass,
		OnNamespace:     b.AddNamespace,
		OnDaemonSet:     func(d manifest.DaemonSet) { in.daemonSets = append(in.daemonSets, d.DaemonSet) },
	}
	if err := rd.Load([]string{file}); err != nil {
		return nil, err
	}
	if len(rd.Errors) > 0 {
		return nil, rd.Errors[0]
	}
	if podErr != nil {
		return nil, fmt.Errorf("%s: %w", file, podErr)
	}
	if declErr != nil {
		return nil, fmt.Errorf("%s: %w", file, declErr)
	}
	if len(records) == 0 {
		return nil, fmt.Errorf("%s holds no Node objects (want the output of dsguard nodes or kubectl get nodes -o yaml)", file)
	}
	in.snap = coverage.NewNodeSnapshotOf(records)
	in.snap.SetLifecycle(coverage.BuiltinLifecycle().With(declared))
	cluster := b.Build()
	switch {
	case pods == 0:
		// Without the Pods, free room is unknown: predicting from empty
		// nodes would say everything fits.
	case !cluster.Known():
		in.fitNote = fmt.Sprintf("%s holds Pods but no node's status.allocatable: resource fit was not predicted", file)
	default:
		in.fit = cluster
		in.fitNote = fmt.Sprintf("resource fit predicted as kube-scheduler v1.37.2 filters and preempts, from %d Pods on the nodes of %s",
			cluster.Pods(), file)
	}
	return &in, nil
}

// fixedCompletion completes a flag from a fixed list.
func fixedCompletion(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// apply gives the input the node set, what the scheduler weighs and the
// cluster's other DaemonSets: the dump's, then those of --previous (the
// first of a name counts).
func (n *nodeInput) apply(in *check.Input) {
	in.Env.Nodes = n.snap
	in.Env.Fit = n.fit
	others := n.daemonSets
	for _, key := range slices.Sorted(maps.Keys(in.Previous)) {
		others = append(others, in.Previous[key])
	}
	in.Env.DaemonSets = func() []*appsv1.DaemonSet { return others }
	in.FitNote = n.fitNote
	in.TaintTimes = n.taintTimes
}
