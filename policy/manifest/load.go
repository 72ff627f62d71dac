package manifest

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// manifestExtensions are the file types read when walking a directory.
// Files named explicitly are read whatever their extension.
var manifestExtensions = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// Rendered is the output of rendering a chart or a kustomization.
type Rendered struct {
	// File names what produced Content: a chart's template, or the
	// kustomization directory.
	File string
	// Content is one or more YAML documents.
	Content []byte
}

// Renderer turns a directory that is a Helm chart or a kustomization into
// the manifests it produces. by names the tool ("helm", "kustomize"); ok is
// false for any other directory, which is then walked file by file.
type Renderer interface {
	Render(dir string) (out []Rendered, by string, ok bool, err error)
}

// Encloser is implemented by a Renderer for which a file means something only
// as part of a directory it renders: a Helm chart's templates (not valid YAML
// alone) and values. Enclosing returns that directory for file, if any.
type Encloser interface {
	Enclosing(file string) (dir string, ok bool)
}

// Stats is what a Reader saw, beyond the objects it handed on.
type Stats struct {
	// Files counts the sources read (a rendered chart or kustomization
	// counts each rendered template or stream).
	Files int
	// Objects counts the Kubernetes objects read, List items included.
	Objects int
	// Skipped counts objects of other kinds, by "apiVersion/kind".
	Skipped map[string]int
	// Ignored lists the files holding YAML that is not a Kubernetes object
	// (Helm values, CI configuration), once each: skipped, not an error.
	Ignored []string
	// Rendered lists the charts and kustomizations rendered, as
	// "helm: DIR" or "kustomize: DIR".
	Rendered []string
	// Errors are the documents that could not be used.
	Errors []*Error
}

// SkippedTotal returns the number of objects skipped.
func (s *Stats) SkippedTotal() int {
	n := 0
	for _, c := range s.Skipped {
		n += c
	}
	return n
}

// Reader reads manifests and hands each DaemonSet and Node to its callbacks
// as soon as it is decoded, so memory is bounded by the largest document, not
// by the input.
type Reader struct {
	// Stdin is read for the path "-".
	Stdin io.Reader
	// Render renders charts and kustomizations; nil reads them as plain
	// files (where Helm templates are not valid YAML).
	Render Renderer
	// OnDaemonSet receives every valid apps/v1 DaemonSet.
	OnDaemonSet func(DaemonSet)
	// OnNode receives every v1 Node.
	OnNode func(*corev1.Node)
	// OnPod, OnPriorityClass and OnNamespace receive every v1 Pod,
	// scheduling.k8s.io/v1 PriorityClass and v1 Namespace (a cluster dump
	// read for what the scheduler weighs); when nil, such objects are
	// skipped like any other kind.
	OnPod           func(*corev1.Pod)
	OnPriorityClass func(*schedulingv1.PriorityClass)
	OnNamespace     func(*corev1.Namespace)
	// OnTaintDeclaration receives, as unstructured objects, every object
	// of a group and kind DeclaresTaints accepts (whatever its version):
	// those that declare lifecycle taints (a Karpenter NodePool, a
	// NodeReadinessRule), which the caller knows and this package need not.
	// When either is nil, such objects are skipped like any other kind.
	OnTaintDeclaration func(*unstructured.Unstructured)
	DeclaresTaints     func(group, kind string) bool
	Stats
	// enclosed are the directories rendered, each rendered once.
	enclosed map[string]bool
}

// Load reads every path: "-" is stdin; a directory that the Renderer knows
// (a chart, a kustomization) is rendered; any other directory is walked
// recursively (hidden directories skipped; charts and kustomizations below it
// rendered); anything else is read as a file. A path that cannot be read or
// rendered is returned as an error; documents that cannot be decoded are
// recorded in Errors.
func (rd *Reader) Load(paths []string) error {
	for _, p := range paths {
		if p == "-" {
			if rd.Stdin == nil {
				return fmt.Errorf("no standard input to read for -")
			}
			rd.Decode("-", rd.Stdin)
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !info.IsDir() {
			if dir, ok := rd.enclosing(p); ok {
				// A chart's template or values file, as a pre-commit hook
				// passes the files a commit touches: the chart is rendered
				// (once), as its templates mean nothing alone.
				if !rd.enclosed[dir] {
					if err := rd.render(dir); err != nil {
						return err
					}
				}
				continue
			}
			if err := rd.loadFile(p); err != nil {
				return err
			}
			continue
		}
		if err := rd.walk(p); err != nil {
			return err
		}
	}
	return nil
}

// walk reads a directory tree; a chart or kustomization found in it is
// rendered as a whole and not descended into.
func (rd *Reader) walk(root string) error {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if !d.IsDir() {
			if manifestExtensions[strings.ToLower(filepath.Ext(path))] {
				files = append(files, path)
			}
			return nil
		}
		if path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if rd.Render == nil {
			return nil
		}
		if rd.enclosed[path] {
			return filepath.SkipDir
		}
		ok, err := rd.renderIf(path)
		if err != nil || !ok {
			return err
		}
		return filepath.SkipDir
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		if err := rd.loadFile(f); err != nil {
			return err
		}
	}
	return nil
}

// renderIf renders dir when the Renderer knows it, and says whether it did.
func (rd *Reader) renderIf(dir string) (bool, error) {
	out, by, ok, err := rd.Render.Render(dir)
	if err != nil {
		return false, fmt.Errorf("%s: %w", dir, err)
	}
	if !ok {
		return false, nil
	}
	if rd.enclosed == nil {
		rd.enclosed = map[string]bool{}
	}
	rd.enclosed[dir] = true
	rd.Rendered = append(rd.Rendered, by+": "+dir)
	for _, r := range out {
		rd.decode(Location{File: r.File, RenderedBy: by}, bytes.NewReader(r.Content))
	}
	return true, nil
}

// render renders the directory enclosing a file.
func (rd *Reader) render(dir string) error {
	ok, err := rd.renderIf(dir)
	if err == nil && !ok {
		err = fmt.Errorf("%s: not a directory dsguard renders", dir)
	}
	return err
}

// enclosing is the directory the Renderer renders that file belongs to.
func (rd *Reader) enclosing(file string) (string, bool) {
	e, ok := rd.Render.(Encloser)
	if !ok {
		return "", false
	}
	return e.Enclosing(file)
}

func (rd *Reader) loadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rd.Decode(path, f)
	return nil
}

// Set collects everything a Reader hands on, for inputs small enough to hold
// (a node set, tests).
type Set struct {
	DaemonSets []DaemonSet
	Nodes      []*corev1.Node
	Stats
}

// Load reads paths like Reader.Load and keeps what they hold.
func (s *Set) Load(paths []string, stdin io.Reader) error {
	rd := s.reader(stdin)
	err := rd.Load(paths)
	s.Stats = rd.Stats
	return err
}

// Decode reads one stream like Reader.Decode and keeps what it holds.
func (s *Set) Decode(file string, r io.Reader) {
	rd := s.reader(nil)
	rd.Decode(file, r)
	s.Stats = rd.Stats
}

func (s *Set) reader(stdin io.Reader) *Reader {
	return &Reader{
		Stdin:       stdin,
		OnDaemonSet: func(d DaemonSet) { s.DaemonSets = append(s.DaemonSets, d) },
		OnNode:      func(n *corev1.Node) { s.Nodes = append(s.Nodes, n) },
		Stats:       s.Stats,
	}
}
