package testrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/check"
	"github.com/dsguard/dsguard/policy"
)

// Inputs are what a test file gives in place of check's flags, with paths
// resolved against the test file's folder ("" when not given).
type Inputs struct {
	// Policy is --config, Nodes --nodes, Previous --previous.
	Policy, Nodes, Previous string
	// Namespace is --namespace.
	Namespace string
	// Now is the time of the verdicts; zero for the time of the run.
	Now time.Time
}

// Runner runs test files.
type Runner struct {
	// Registry is the rule catalogue the expectations name rules of.
	Registry *policy.Registry
	// Prepare builds the check.Input that dsguard check builds from the same
	// flags: its Env (policy, time, nodes, fit, the cluster's DaemonSets),
	// Previous, Render, Namespace and FitNote. The runner sets Paths.
	Prepare func(Inputs) (check.Input, error)
}

// Case is one expectation and what dsguard gave.
type Case struct {
	// File is the test file.
	File string
	// DaemonSet is namespace/name; Manifest the file that holds it.
	DaemonSet, Manifest string
	// In is the manifest as the expectation names it (file), "" when it
	// names none.
	In            string
	Rule          string
	Expected, Got Result
	// ExpectedNodes are the nodes the findings must name, nil when the
	// expectation names none; GotNodes those they name (nil then too).
	ExpectedNodes, GotNodes []string
	// Findings are the rule's findings for the DaemonSet.
	Findings []policy.Finding
	Passed   bool
}

// Report is the outcome of a run.
type Report struct {
	// Files are the test files run.
	Files []string
	// Cases are their expectations, in file order.
	Cases []Case
}

// Failed counts the cases that failed.
func (r *Report) Failed() int {
	n := 0
	for i := range r.Cases {
		if !r.Cases[i].Passed {
			n++
		}
	}
	return n
}

// Exit codes of dsguard test: a run whose input cannot be judged (an
// invalid test file, a manifest that cannot be read) is 2, like check's.
const (
	ExitOK      = check.ExitOK
	ExitFailed  = check.ExitDenied
	ExitInvalid = check.ExitInvalid
)

// ExitCode is 1 when any case failed, else 0.
func (r *Report) ExitCode() int {
	if r.Failed() > 0 {
		return ExitFailed
	}
	return ExitOK
}

// Discover returns the test files the paths name: a file as given, and in
// a directory every dsguard-test.yaml (or .yml) below it, in lexical order,
// hidden folders left out.
func Discover(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		n := len(out)
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != p && strings.HasPrefix(d.Name(), ".") {
				// .git and the like, as check leaves them unread.
				return filepath.SkipDir
			}
			if !d.IsDir() && (d.Name() == FileName || d.Name() == strings.TrimSuffix(FileName, ".yaml")+".yml") {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(out) == n {
			return nil, fmt.Errorf("no %s under %s", FileName, p)
		}
	}
	return out, nil
}

// Run runs the test files the paths name (see Discover). Every file is
// read and judged before Run answers: when any cannot be (an invalid file,
// a DaemonSet the manifests do not hold, a manifest that cannot be read),
// the error lists every such problem and no case counts.
func (r *Runner) Run(paths []string) (*Report, error) {
	files, err := Discover(paths)
	if err != nil {
		return nil, err
	}
	rep := &Report{Files: files}
	var errs []error
	for _, path := range files {
		f, err := ReadFile(path, r.Registry)
		if f == nil {
			errs = append(errs, err)
			continue
		}
		cases, runErr := r.runFile(f)
		if err != nil {
			// The file decoded but is not valid: what the run finds wrong
			// too (a DaemonSet the manifests do not hold) joins its
			// problems, so that one edit can fix them all.
			errs = append(errs, mergeProblems(err, runErr))
			continue
		}
		if runErr != nil {
			errs = append(errs, runErr)
			continue
		}
		rep.Cases = append(rep.Cases, cases...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rep, nil
}

// runFile judges a test file's manifests as check does and compares.
func (r *Runner) runFile(f *File) ([]Case, error) {
	paths, errs := f.manifestPaths()
	if len(errs) > 0 {
		return nil, f.problems(errs)
	}
	in, err := r.Prepare(Inputs{Policy: f.resolve(f.Policy), Nodes: f.resolve(f.Nodes), Previous: f.resolve(f.Previous),
		Namespace: f.namespace(), Now: f.now})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	in.Paths = paths
	in.Stream = nil
	res, err := check.Run(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	if len(res.Errors) > 0 {
		msgs := make([]string, len(res.Errors))
		for i, e := range res.Errors {
			msgs[i] = "\n  " + e.Error()
		}
		return nil, fmt.Errorf("%s: the manifests cannot all be read:%s", f.path, strings.Join(msgs, ""))
	}
	byKey := map[string][]*check.Result{}
	for i := range res.Results {
		x := &res.Results[i]
		byKey[x.Namespace+"/"+x.Name] = append(byKey[x.Namespace+"/"+x.Name], x)
	}
	var nodes []string
	if in.Env.Nodes != nil {
		nodes = in.Env.Nodes.Names()
	}
	var cases []Case
	for i := range f.Expect {
		e := &f.Expect[i]
		fp := field.NewPath("expect").Index(i)
		x, fe := f.find(e, byKey, fp)
		if fe != nil {
			errs = append(errs, fe)
			continue
		}
		if rule, ok := r.Registry.Get(e.Rule); ok && rule.NeedsFit && in.Env.Fit == nil {
			errs = append(errs, field.Invalid(fp.Child("rule"), e.Rule, "the rule needs the cluster's Pods and the nodes' allocatable: "+
				"give nodes as kubectl get nodes,pods,priorityclasses,namespaces -A -o yaml prints them"))
			continue
		}
		for j, n := range e.Nodes {
			if _, ok := slices.BinarySearch(nodes, n); !ok {
				errs = append(errs, field.NotFound(fp.Child("nodes").Index(j), n))
			}
		}
		cases = append(cases, judge(f.path, e, x, nodes))
	}
	if len(errs) > 0 {
		return nil, f.problems(errs)
	}
	return cases, nil
}

// mergeProblems adds the problems of a run to those of its file's
// validation, in the order of their lines; a run that failed otherwise (a
// policy that cannot be read) follows them.
func mergeProblems(invalid, run error) error {
	var a, b *InputError
	if !errors.As(invalid, &a) || !errors.As(run, &b) {
		return errors.Join(invalid, run)
	}
	merged := *a
	merged.Problems = append(slices.Clone(a.Problems), b.Problems...)
	slices.SortStableFunc(merged.Problems, func(x, y policy.ConfigProblem) int { return x.Line - y.Line })
	return &merged
}

// manifestPaths resolves the manifests against the test file's folder,
// expanding globs; each entry must name something.
func (f *File) manifestPaths() ([]string, field.ErrorList) {
	var paths []string
	var errs field.ErrorList
	for i, m := range f.Manifests {
		p := f.resolve(m)
		if !strings.ContainsAny(m, `*?[\`) {
			if _, err := os.Stat(p); err != nil {
				errs = append(errs, field.Invalid(field.NewPath("manifests").Index(i), m, "no such file or directory"))
			}
			paths = append(paths, p)
			continue
		}
		matches, _ := filepath.Glob(p) // the pattern was checked by validate
		if len(matches) == 0 {
			errs = append(errs, field.Invalid(field.NewPath("manifests").Index(i), m, "the glob matches no file"))
		}
		paths = append(paths, matches...)
	}
	return paths, errs
}

// find returns the result an expectation is about: the one DaemonSet of
// its name (in its file, when it names one).
func (f *File) find(e *Expectation, byKey map[string][]*check.Result, fp *field.Path) (*check.Result, *field.Error) {
	key := e.key(f.namespace())
	found := byKey[key]
	if e.File != "" {
		want := filepath.Clean(f.resolve(e.File))
		found = slices.DeleteFunc(slices.Clone(found), func(x *check.Result) bool { return filepath.Clean(x.Location.File) != want })
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		where := make([]string, len(found))
		for i, x := range found {
			where[i] = fmt.Sprintf("%s document %d", f.relative(x.Location.File), x.Location.Document)
		}
		return nil, field.Invalid(fp.Child("daemonSet"), key, "the manifests hold it more than once ("+strings.Join(where, ", ")+"): say which with file")
	case e.File != "":
		return nil, field.Invalid(fp.Child("file"), e.File, "holds no DaemonSet "+key)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	have := "they hold no DaemonSet"
	if len(keys) > 0 {
		have = "they hold " + strings.Join(keys, ", ")
	}
	return nil, field.Invalid(fp.Child("daemonSet"), key, "not among the DaemonSets of the manifests ("+have+")")
}

// relative is a path of the run relative to the test file's folder.
func (f *File) relative(p string) string {
	if rel, err := filepath.Rel(filepath.Dir(f.path), p); err == nil {
		return rel
	}
	return p
}

// judge compares what the rule gave the DaemonSet with the expectation.
func judge(file string, e *Expectation, x *check.Result, nodes []string) Case {
	c := Case{File: file, DaemonSet: x.Namespace + "/" + x.Name, Manifest: x.Location.File, Rule: e.Rule,
		In: e.File, Expected: e.Result, ExpectedNodes: e.Nodes}
	for _, fd := range x.Findings {
		if fd.RuleID == e.Rule {
			c.Findings = append(c.Findings, fd)
		}
	}
	c.Got = resultOf(c.Findings)
	c.Passed = c.Got == c.Expected
	if e.Nodes != nil {
		c.GotNodes = namedNodes(c.Findings, nodes)
		want := slices.Sorted(slices.Values(e.Nodes))
		c.Passed = c.Passed && slices.Equal(slices.Compact(want), c.GotNodes)
	}
	return c
}

// resultOf is the strongest action of the findings, pass for none.
func resultOf(fs []policy.Finding) Result {
	got := ResultPass
	for _, f := range fs {
		switch f.Action {
		case policy.ActionDeny:
			return ResultDeny
		case policy.ActionWarn:
			got = ResultWarn
		case policy.ActionAudit:
			if got == ResultPass {
				got = ResultAudit
			}
		}
	}
	return got
}

// namedNodes returns, sorted, the nodes of the node set that the findings'
// messages and details name.
func namedNodes(fs []policy.Finding, nodes []string) []string {
	var text []string
	for _, f := range fs {
		text = append(append(text, f.Message), f.Details...)
	}
	all := strings.Join(text, "\n")
	out := []string{}
	for _, n := range nodes {
		if mentions(all, n) {
			out = append(out, n)
		}
	}
	return out
}

// mentions reports whether text names the node as a word of its own:
// "worker-1" is not named by "worker-10", nor "a.b" by "a.b.c"; a full stop
// ending a sentence ends the name.
func mentions(text, name string) bool {
	for i := 0; i <= len(text)-len(name); {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(name)
		before := j == 0 || !nameByte(text[j-1])
		after := end == len(text) || !nameByte(text[end]) ||
			(text[end] == '.' && (end+1 == len(text) || !nameByte(text[end+1]) || text[end+1] == '.'))
		if before && after {
			return true
		}
		i = j + 1
	}
	return false
}

// nameByte reports whether b may be part of a node name.
func nameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '.' || b == '_'
}
