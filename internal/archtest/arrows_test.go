// Package archtest holds the test that keeps the imports between dsguard's
// packages to the arrows drawn in docs/architecture.md.
package archtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/dsguard/dsguard"

// arrowsDoc holds the arrows, in a code block whose lines read
// "a, b ──► c, d" or "a ──► nothing of dsguard".
const arrowsDoc = "../../docs/architecture.md"

// arrowLine is an import line of the doc: package paths, the arrow, what
// they may import. The doc's other pictures use the arrow too, between
// words that are not lists of package paths.
var arrowLine = regexp.MustCompile(`^([a-z][a-z0-9/]*(?:, [a-z][a-z0-9/]*)*) +──► +(.+)$`)

// outside are the trees nothing imports and that may import anything.
var outside = []string{"test/", "hack/"}

// testExtras may be imported by any package's tests besides what the package
// itself may import: the shared test objects, and the real catalogue for
// tests that judge DaemonSets.
var testExtras = []string{"internal/testobj", "policy/rules", "internal/archtest"}

// testArrows are what one package's tests alone may import besides: the
// generated policies are held to the real webhook handler, their reference
// (docs/architecture.md says so under the arrows).
var testArrows = map[string][]string{"vap": {"webhook", "clusterview"}}

// TestImportArrows fails when a package imports another dsguard package that
// docs/architecture.md does not allow it to, or when a package is missing
// from the doc.
func TestImportArrows(t *testing.T) {
	allowed := readArrows(t)
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "" || slices.ContainsFunc(outside, func(o string) bool { return strings.HasPrefix(rel, o) }) {
			continue
		}
		may, ok := allowed[rel]
		if !ok {
			t.Errorf("package %s is not in the arrows of %s: add it and what it may import", rel, arrowsDoc)
			continue
		}
		for _, imp := range ownImports(p.Imports) {
			if !slices.Contains(may, imp) {
				t.Errorf("%s imports %s, against the arrows of %s", rel, imp, arrowsDoc)
			}
		}
		for _, imp := range ownImports(append(p.TestImports, p.XTestImports...)) {
			if imp != rel && !slices.Contains(may, imp) && !slices.Contains(testExtras, imp) && !slices.Contains(testArrows[rel], imp) {
				t.Errorf("the tests of %s import %s, against the arrows of %s", rel, imp, arrowsDoc)
			}
		}
	}
}

// TestImportArrows_DocIsRead guards the guard: the arrows must be found, and a
// known forbidden import must be refused by them.
func TestImportArrows_DocIsRead(t *testing.T) {
	allowed := readArrows(t)
	if len(allowed) < 10 {
		t.Fatalf("read %d packages from %s, want every package", len(allowed), arrowsDoc)
	}
	if slices.Contains(allowed["webhook"], "audit") || slices.Contains(allowed["coverage"], "policy") {
		t.Errorf("the arrows allow webhook → audit or coverage → policy: %v", allowed)
	}
	if !slices.Contains(allowed["policy/rules"], "policy") {
		t.Errorf("the arrows do not allow policy/rules → policy: %v", allowed)
	}
}

// readArrows parses the arrow lines of the doc: package → what it may import.
func readArrows(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(arrowsDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	allowed := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := arrowLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		from, to := m[1], m[2]
		var targets []string
		if !strings.Contains(to, "nothing of dsguard") {
			targets = splitList(to)
		}
		for _, p := range splitList(from) {
			if _, dup := allowed[p]; dup {
				t.Errorf("%s: package %s has two arrow lines", arrowsDoc, p)
			}
			allowed[p] = targets
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return allowed
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// listPackages asks the go command for every package of the module.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	return pkgs
}

// ownImports keeps the module's own packages, relative to the module.
func ownImports(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
			out = append(out, rel)
		}
	}
	return out
}
