package check

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/manifest"
)

// Input is what `dsguard check` reads and judges against.
type Input struct {
	// Paths are files, directories or "-".
	Paths []string
	// Stdin is read for "-".
	Stdin io.Reader
	// Render renders charts and kustomizations; nil reads them as files.
	Render manifest.Renderer
	// Env carries the policy, the time and the node set (nil: node rules
	// are skipped).
	Env policy.Env
	// FitNote says whether and from what resource fit was predicted
	// (Env.Fit); it joins the report's notes.
	FitNote string
	// TaintTimes are when the nodes of Env.Nodes got their taints, where
	// they say: a placement shows how long each node has carried a
	// lifecycle taint.
	TaintTimes coverage.TaintTimes
	// Previous are the DaemonSets as they stand in the cluster, by
	// namespace/name (kubectl get ds -o yaml, status included): a
	// DaemonSet checked is then judged as an UPDATE of its namesake, and
	// rollout-impact says what the change does. Nil: every DaemonSet is a
	// CREATE.
	Previous map[string]*appsv1.DaemonSet
	// Namespace is assumed for DaemonSets that name none.
	Namespace string
	// FailOn is the weakest action that fails the check; deny when empty.
	FailOn policy.Action
	// Stream, when set, receives each DaemonSet's result as soon as it is
	// judged, and the result is not kept: memory then follows the largest
	// document, not the input or the number of findings. Every output
	// format has a Writer whose Result is such a Stream.
	Stream func(*Result) error
}

// ErrNoInput means the paths held no Kubernetes object at all: a check of
// nothing must not pass silently (a wrong path, an empty render).
var ErrNoInput = errors.New("no Kubernetes objects found")

// Run reads the input and judges every DaemonSet as soon as it is decoded,
// handing it to in.Stream or else keeping its findings and placement. A path
// that cannot be read, and an input without any Kubernetes object, are
// errors. When the run stops on an error after DaemonSets were judged (and
// maybe written), Run also returns the results until then, with Stopped set,
// so that the output begun can be ended.
func Run(in Input) (*Results, error) {
	r := &Results{FailOn: in.FailOn}
	if r.FailOn == "" {
		r.FailOn = policy.ActionDeny
	}
	rd := &manifest.Reader{Stdin: in.Stdin, Render: in.Render}
	var streamErr error
	gated := 0 // DaemonSets with exemption or intended-coverage annotations
	rd.OnDaemonSet = func(d manifest.DaemonSet) {
		if streamErr != nil {
			// The output cannot be written: judging the rest is wasted.
			return
		}
		if policy.HasGatedAnnotation(d.DaemonSet) {
			gated++
		}
		env := in.Env
		ns := cmp.Or(d.DaemonSet.Namespace, in.Namespace)
		env.Previous = in.Previous[ns+"/"+d.DaemonSet.Name]
		res := judge(d, env, in.Namespace)
		if res.Placement != nil && len(in.TaintTimes) > 0 {
			res.Placement.NoteTaintTimes(in.TaintTimes, env.Now)
		}
		if in.Stream != nil {
			if streamErr = in.Stream(&res); streamErr != nil {
				return
			}
		}
		r.add(res, in.Stream == nil)
	}
	err := rd.Load(in.Paths)
	if streamErr != nil {
		return nil, streamErr
	}
	r.Errors, r.Files, r.Skipped = rd.Errors, rd.Files, rd.Skipped
	if err != nil {
		if r.counts.DaemonSets == 0 {
			return nil, err
		}
		r.Stopped = err
		return r, err
	}
	if rd.Objects == 0 && len(rd.Errors) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoInput, strings.Join(in.Paths, ", "))
	}
	for _, f := range rd.Ignored {
		r.Notes = append(r.Notes, f+": not a Kubernetes manifest, skipped")
	}
	for _, s := range rd.Rendered {
		r.Notes = append(r.Notes, "rendered with "+s)
	}
	if r.counts.DaemonSets == 0 && len(rd.Errors) == 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("no DaemonSet among the %d objects read", rd.Objects))
	}
	if gated > 0 && in.Env.Policy != nil && in.Env.Policy.GroupGated() {
		r.Notes = append(r.Notes, fmt.Sprintf("groups not checked offline: %s exemption or intended-coverage annotations; "+
			"RBAC (exemptions.grantedByRBAC) and exemptions.allowedGroups decide at admission who may add or change them, and check does not know who will apply them",
			countDaemonSets(gated, "carries", "carry")))
	}
	if n := lifecycleDeclarations(rd.Skipped); n > 0 && in.Env.Nodes != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("%s among the manifests declare lifecycle taints and were not read for them: "+
			"only the --nodes file's NodePools and NodeReadinessRules are (add them there)", plural(n, "object")))
	}
	if in.FitNote != "" {
		r.Notes = append(r.Notes, in.FitNote)
	}
	if in.Env.Nodes == nil && needsNodes() {
		r.Notes = append(r.Notes, "node-dependent rules were skipped: pass --nodes (dsguard nodes > nodes.yaml) to judge coverage")
	}
	return r, nil
}

// judge evaluates one DaemonSet and keeps what the output needs.
func judge(d manifest.DaemonSet, env policy.Env, namespace string) Result {
	ds := d.DaemonSet
	if ds.Namespace == "" {
		ds.Namespace = namespace
	}
	// One prediction for the rules and the placement: Evaluate's copy of
	// env carries it along.
	cov := env.Coverage(ds)
	report := env.FitReport(ds)
	res := Result{Fit: report, Location: d.Location, Namespace: ds.Namespace, Name: ds.Name, Findings: policy.Evaluate(ds, env)}
	if len(res.Findings) > 0 {
		res.Positions = make([]manifest.Position, len(res.Findings))
		for i := range res.Findings {
			res.Positions[i] = d.Position(res.Findings[i].FieldString())
		}
	}
	if cov != nil {
		res.Placement = coverage.NewPlacement(ds, cov, env.Nodes)
	}
	return res
}

// Fails reports whether the result fails a check run with failOn.
func (r *Result) Fails(failOn policy.Action) bool {
	v := r.Verdict()
	return v == VerdictDeny || (failOn == policy.ActionWarn && v == VerdictWarn)
}

// lifecycleDeclarations counts the skipped objects that declare lifecycle
// taints (Karpenter NodePools, NodeReadinessRules), from the reader's counts
// by apiVersion/kind.
func lifecycleDeclarations(skipped map[string]int) int {
	n := 0
	for typ, count := range skipped {
		i := strings.LastIndex(typ, "/")
		if i < 0 {
			continue
		}
		if gvk := schema.FromAPIVersionAndKind(typ[:i], typ[i+1:]); coverage.DeclaresLifecycleTaints(gvk.Group, gvk.Kind) {
			n += count
		}
	}
	return n
}

// countDaemonSets is "1 DaemonSet <one>" or "N DaemonSets <many>".
func countDaemonSets(n int, one, many string) string {
	if n == 1 {
		return "1 DaemonSet " + one
	}
	return fmt.Sprintf("%d DaemonSets %s", n, many)
}
