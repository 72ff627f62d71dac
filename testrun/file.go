package testrun

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/policy"
)

// FileName is the name of a test file: Discover finds every file so named
// (or with the .yml ending) under the directories it is given.
const FileName = "dsguard-test.yaml"

// APIVersion and Kind identify a test file, as apiVersion and kind identify
// a policy document.
const (
	APIVersion = "dsguard.io/v1alpha1"
	Kind       = "Test"
)

// Result is a verdict one rule gives one DaemonSet: the strongest action of
// the rule's findings, or pass when it has none.
type Result string

// The results, strongest first.
const (
	ResultDeny  Result = "deny"
	ResultWarn  Result = "warn"
	ResultAudit Result = "audit"
	ResultPass  Result = "pass"
)

// Results lists the valid results, strongest first.
var Results = []Result{ResultDeny, ResultWarn, ResultAudit, ResultPass}

// File is one test file: what to judge, against what, and what to expect.
// Paths are relative to the file's folder.
type File struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	// Name says what the file tests; optional.
	Name string `yaml:"name"`
	// Manifests are files, directories (read recursively) or globs, as
	// dsguard check takes them: charts and kustomizations are rendered.
	Manifests []string `yaml:"manifests"`
	// Nodes is the node set, as check --nodes takes it: dsguard nodes'
	// output, kubectl get nodes -o yaml, or a cluster dump with Pods,
	// PriorityClasses, Namespaces and DaemonSets. Optional: without it,
	// rules that need nodes cannot be expected.
	Nodes string `yaml:"nodes"`
	// Policy is the policy file, as check --config takes it; the built-in
	// default policy when empty.
	Policy string `yaml:"policy"`
	// Previous are the DaemonSets as they stand in the cluster, as check
	// --previous takes them; optional.
	Previous string `yaml:"previous"`
	// Namespace is assumed for DaemonSets that name none (default).
	Namespace string `yaml:"namespace"`
	// Now is the time exemption expiry is judged at (RFC 3339 or
	// YYYY-MM-DD), so that a test of an expiring exemption keeps its
	// verdict; the time of the run when empty.
	Now string `yaml:"now"`
	// Expect holds one expectation per DaemonSet and rule.
	Expect []Expectation `yaml:"expect"`

	// path is where the file was read from, as given.
	path string
	// root is the decoded document, for the lines of problems.
	root yaml.Node
	// now is Now parsed; zero when not set.
	now time.Time
}

// Expectation is the verdict one rule must give one DaemonSet.
type Expectation struct {
	// DaemonSet is namespace/name, or a name alone in the file's namespace.
	DaemonSet string `yaml:"daemonSet"`
	// File names the manifest that holds the DaemonSet, relative to the test
	// file; needed only when the manifests hold two of that name.
	File string `yaml:"file"`
	// Rule is the rule's ID (dsguard rules lists them).
	Rule string `yaml:"rule"`
	// Result is deny, warn, audit or pass.
	Result Result `yaml:"result"`
	// Nodes, when set, are exactly the nodes of the node set that the rule's
	// findings must name (in their messages and details); [] means none.
	Nodes []string `yaml:"nodes"`
}

// Path is where the file was read from.
func (f *File) Path() string { return f.path }

// resolve returns a path of the file relative to the test file's folder.
func (f *File) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(f.path), p)
}

// namespace is the namespace assumed for DaemonSets that name none.
func (f *File) namespace() string {
	if f.Namespace == "" {
		return "default"
	}
	return f.Namespace
}

// key is the expectation's DaemonSet as namespace/name.
func (e *Expectation) key(namespace string) string {
	if strings.Contains(e.DaemonSet, "/") {
		return e.DaemonSet
	}
	return namespace + "/" + e.DaemonSet
}

// InputError is a test file that cannot be run, with every problem found:
// exit status 2, like a policy or manifest check cannot read.
type InputError struct {
	File     string
	Problems []policy.ConfigProblem
}

// Error lists the problems, one a line.
func (e *InputError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: invalid test file:", e.File)
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// problems turns field errors into problems with the lines of the file
// they point at, or nil when there are none.
func (f *File) problems(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	e := &InputError{File: f.path}
	for _, fe := range errs {
		e.Problems = append(e.Problems, policy.ConfigProblem{Line: policy.LineOf(&f.root, fe.Field), Field: fe.Field, Message: fe.ErrorBody()})
	}
	return e
}

// ReadFile reads and decodes a test file strictly (an unknown or misspelt
// key is an error with its line) and checks what can be checked without
// the manifests: required keys, rule IDs, results, what each rule needs.
// A file that decodes but is not valid is returned with the error.
func ReadFile(path string, reg *policy.Registry) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &File{path: path}
	if err := yaml.Unmarshal(data, &f.root); err != nil {
		return nil, &InputError{File: path, Problems: policy.YAMLProblems(err)}
	}
	if f.root.Kind == 0 {
		return nil, &InputError{File: path, Problems: []policy.ConfigProblem{{Message: "the test file is empty"}}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil {
		return nil, &InputError{File: path, Problems: policy.YAMLProblems(err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &InputError{File: path, Problems: []policy.ConfigProblem{{Line: extra.Line, Message: "one test per file: a second YAML document follows"}}}
	}
	if err := f.problems(f.validate(reg)); err != nil {
		return f, err
	}
	return f, nil
}

// validate checks the file on its own, collecting every problem.
func (f *File) validate(reg *policy.Registry) field.ErrorList {
	var errs field.ErrorList
	if f.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), f.APIVersion, []string{APIVersion}))
	}
	if f.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), f.Kind, []string{Kind}))
	}
	if len(f.Manifests) == 0 {
		errs = append(errs, field.Required(field.NewPath("manifests"), "the manifests to judge: files, directories or globs, relative to this file"))
	}
	for i, m := range f.Manifests {
		if _, err := filepath.Match(m, ""); err != nil || m == "" || m == "-" {
			errs = append(errs, field.Invalid(field.NewPath("manifests").Index(i), m, "want a file, directory or glob relative to this file"))
		}
	}
	for _, p := range []struct{ key, value string }{{"nodes", f.Nodes}, {"policy", f.Policy}, {"previous", f.Previous}} {
		if p.value == "-" {
			errs = append(errs, field.Invalid(field.NewPath(p.key), p.value, "a test reads files, not standard input"))
		}
	}
	if f.Now != "" {
		var err error
		if f.now, err = time.Parse(time.RFC3339, f.Now); err != nil {
			if f.now, err = time.Parse(time.DateOnly, f.Now); err != nil {
				errs = append(errs, field.Invalid(field.NewPath("now"), f.Now, "want an RFC 3339 time (2026-06-01T12:00:00Z) or a date (2026-06-01)"))
			}
		}
	}
	if len(f.Expect) == 0 {
		errs = append(errs, field.Required(field.NewPath("expect"), "the verdicts expected, each with daemonSet, rule and result"))
	}
	seen := map[string]int{}
	results := make([]string, len(Results))
	for i, r := range Results {
		results[i] = string(r)
	}
	for i := range f.Expect {
		e := &f.Expect[i]
		fp := field.NewPath("expect").Index(i)
		if e.DaemonSet == "" {
			errs = append(errs, field.Required(fp.Child("daemonSet"), "namespace/name of a DaemonSet of the manifests"))
		} else if n := strings.Count(e.DaemonSet, "/"); n > 1 || strings.HasPrefix(e.DaemonSet, "/") || strings.HasSuffix(e.DaemonSet, "/") {
			errs = append(errs, field.Invalid(fp.Child("daemonSet"), e.DaemonSet, "want namespace/name, or a name in the test's namespace"))
		}
		errs = append(errs, validateRule(reg, fp.Child("rule"), e.Rule, f.Nodes != "")...)
		if !slices.Contains(Results, e.Result) {
			errs = append(errs, field.NotSupported(fp.Child("result"), e.Result, results))
		}
		if e.Nodes != nil && e.Result == ResultPass {
			errs = append(errs, field.Invalid(fp.Child("nodes"), fmt.Sprint(e.Nodes), "a rule that passes names no node: expect nodes with deny, warn or audit"))
		}
		if e.Nodes != nil && f.Nodes == "" {
			errs = append(errs, field.Invalid(fp.Child("nodes"), fmt.Sprint(e.Nodes), "findings name nodes of the node set: give it with nodes"))
		}
		key := e.key(f.namespace()) + " " + filepath.Clean(e.File) + " " + e.Rule
		if j, dup := seen[key]; dup {
			errs = append(errs, field.Duplicate(fp, fmt.Sprintf("%s %s, as expect[%d]", e.key(f.namespace()), e.Rule, j)))
		}
		seen[key] = i
	}
	return errs
}

// validateRule checks that id names a rule that dsguard check judges with
// the inputs the file gives.
func validateRule(reg *policy.Registry, fp *field.Path, id string, haveNodes bool) field.ErrorList {
	if id == "" {
		return field.ErrorList{field.Required(fp, "a rule ID (dsguard rules lists them)")}
	}
	r, ok := reg.Get(id)
	switch {
	case !ok:
		ids := make([]string, 0, len(reg.Rules()))
		for _, r := range reg.Rules() {
			if !r.OnNodeChange {
				ids = append(ids, r.ID)
			}
		}
		return field.ErrorList{field.NotSupported(fp, id, ids)}
	case r.OnNodeChange:
		return field.ErrorList{field.Invalid(fp, id, "the rule judges a change to a Node (dsguard taint, dsguard label), which check and test do not make")}
	case r.NeedsNodes && !haveNodes:
		return field.ErrorList{field.Invalid(fp, id, "the rule needs the node set: give it with nodes (dsguard nodes > nodes.yaml)")}
	}
	return nil
}
