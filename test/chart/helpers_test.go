package chart

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// namespace is the release namespace every case renders into.
const namespace = "dsguard-system"

// valueCase is one set of values the chart is rendered with; the golden file
// is testdata/golden/<name>.yaml.
type valueCase struct {
	name   string
	values string // file under testdata/values; empty: the chart's defaults
}

var cases = []valueCase{
	{name: "default"},
	{name: "webhook-url", values: "webhook-url.yaml"},
	{name: "fail-open-monitored", values: "fail-open-monitored.yaml"},
	{name: "single-replica", values: "single-replica.yaml"},
	{name: "self-managed", values: "self-managed.yaml"},
	{name: "cert-manager", values: "cert-manager.yaml"},
	{name: "cert-manager-issuer", values: "cert-manager-issuer.yaml"},
	{name: "client-auth", values: "client-auth.yaml"},
}

// args returns the helm arguments that select the case's values.
func (c valueCase) args() []string {
	if c.values == "" {
		return nil
	}
	return []string{"--values", filepath.Join("test", "chart", "testdata", "values", c.values)}
}

type env struct {
	root  string
	tools string
	err   error
}

var (
	envOnce sync.Once
	shared  env
)

// setup finds the repository root and the tools directory once per run.
func setup(t *testing.T) env {
	t.Helper()
	envOnce.Do(func() {
		shared.root, shared.err = framework.RepoRoot()
		if shared.err == nil {
			shared.tools, shared.err = framework.ToolsDir(shared.root)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared
}

var (
	dsguardOnce sync.Once
	dsguardDir  string
	dsguardBin  string
	dsguardErr  error
)

// TestMain removes the dsguard binary the tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	if dsguardDir != "" {
		_ = os.RemoveAll(dsguardDir)
	}
	os.Exit(code)
}

// dsguard builds the dsguard binary under test once per run: the tests that
// compare the chart's arguments with its flags share it.
func (e env) dsguard(t *testing.T) string {
	t.Helper()
	dsguardOnce.Do(func() {
		if dsguardDir, dsguardErr = os.MkdirTemp("", "dsguard-chart-test-"); dsguardErr == nil {
			dsguardBin, dsguardErr = framework.BuildDsguard(e.root, dsguardDir)
		}
	})
	if dsguardErr != nil {
		t.Fatal(dsguardErr)
	}
	return dsguardBin
}

// helm is one Helm binary the chart must work with.
type helm struct {
	name string // "helm3" or "helm4", for subtest names
	path string
}

// helms returns Helm 3 and Helm 4 as hack/tools.sh builds them.
func (e env) helms() []helm {
	return []helm{
		{name: "helm3", path: filepath.Join(e.tools, "helm")},
		{name: "helm4", path: filepath.Join(e.tools, "helm4")},
	}
}

type result struct {
	cmd            string
	stdout, stderr string
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("$ %s\n%s%s", r.cmd, r.stdout, r.stderr)
}

// run runs a binary in the repository root.
func (e env) run(bin string, args ...string) result {
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Helm must not read the developer's own repositories or plugins.
	home, _ := os.MkdirTemp("", "dsguard-helm-home-")
	defer os.RemoveAll(home)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return result{cmd: filepath.Base(bin) + " " + strings.Join(args, " "), stdout: out.String(), stderr: errb.String(), err: err}
}

// flags returns the long flags `dsguard <command...> --help` lists.
func (e env) flags(t *testing.T, bin string, command ...string) map[string]bool {
	t.Helper()
	help := e.run(bin, append(command, "--help")...)
	if help.err != nil {
		t.Fatalf("%v\n%s", help.err, help)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(help.stdout, -1) {
		flags[m[1]] = true
	}
	return flags
}

// template renders the chart as release dsguard in the test namespace.
func (e env) template(t *testing.T, h helm, extra ...string) string {
	t.Helper()
	args := append([]string{"template", "dsguard", "charts/dsguard", "--namespace", namespace}, extra...)
	r := e.run(h.path, args...)
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r)
	}
	return normalize(r.stdout)
}

// normalize makes Helm 3's and Helm 4's output comparable: Helm 4 ends each
// document with an empty line and sorts kinds it does not know (ServiceMonitor)
// elsewhere. Documents are ordered by template file, in template order.
func normalize(manifests string) string {
	var docs []string
	for _, d := range strings.Split(manifests, "\n---\n") {
		if d = strings.TrimSpace(strings.TrimPrefix(d, "---\n")); d != "" {
			docs = append(docs, d)
		}
	}
	source := func(doc string) string { line, _, _ := strings.Cut(doc, "\n"); return line }
	slices.SortStableFunc(docs, func(a, b string) int { return strings.Compare(source(a), source(b)) })
	return "---\n" + strings.Join(docs, "\n---\n") + "\n"
}

// object is a rendered object, loosely typed for assertions.
type object map[string]any

// objects parses rendered manifests.
func objects(t *testing.T, manifests string) []object {
	t.Helper()
	var out []object
	for _, d := range strings.Split(manifests, "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, d)
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

// find returns the rendered objects of a kind.
func find(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o["kind"] == kind {
			out = append(out, o)
		}
	}
	return out
}

// get walks a path of map keys and list indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				if o, isObj := v.(object); isObj {
					m = o
				} else {
					return nil
				}
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// exitCode returns the exit code of a finished command, -1 if it did not run.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
