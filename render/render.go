package render

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/dsguard/dsguard/policy/manifest"
)

// ErrNoCharts is Chart's answer in builds without Helm (the container
// image's, built with -tags norender; see ChartsRendered).
var ErrNoCharts = errors.New("this dsguard build renders no Helm charts (the container image's binary leaves Helm out): " +
	"check charts with a release binary, or render them first: helm template CHART | dsguard check -f -")

// Options are the knobs of `helm template` that change what a chart renders.
type Options struct {
	// ValuesFiles are merged in order over the chart's values.yaml, like
	// helm's --values.
	ValuesFiles []string
	// Set holds helm --set expressions (a.b=c,d[0]=e), applied after the
	// values files.
	Set []string
	// ReleaseName is .Release.Name; helm template's default when empty.
	ReleaseName string
	// Namespace is .Release.Namespace; "default" when empty.
	Namespace string
}

// Renderer renders charts and kustomizations for a manifest.Reader.
type Renderer struct {
	Options Options
}

var _ manifest.Renderer = Renderer{}

// Render renders dir when it is a Helm chart (holds Chart.yaml) or a
// kustomization (holds kustomization.yaml, .yml or Kustomization).
func (r Renderer) Render(dir string) ([]manifest.Rendered, string, bool, error) {
	if exists(filepath.Join(dir, "Chart.yaml")) {
		out, err := Chart(dir, r.Options)
		return out, "helm", true, err
	}
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if exists(filepath.Join(dir, name)) {
			out, err := Kustomize(dir)
			return out, "kustomize", true, err
		}
	}
	return nil, "", false, nil
}

var _ manifest.Encloser = Renderer{}

// Enclosing returns the outermost Helm chart file lies in (a template, the
// values, a subchart's files), so that a file passed alone, as a pre-commit
// hook passes the files a commit touches, is checked as its chart renders it.
// A kustomization's files are plain manifests and stay files.
func (Renderer) Enclosing(file string) (string, bool) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", false
	}
	// Counted in levels above the file's directory, to answer in file's
	// terms (relative when file is).
	up, levels := -1, 0
	for dir := filepath.Dir(abs); ; dir, levels = filepath.Dir(dir), levels+1 {
		if exists(filepath.Join(dir, "Chart.yaml")) {
			up = levels
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	if up < 0 {
		return "", false
	}
	return filepath.Join(filepath.Dir(file), strings.Repeat("../", up)), true
}

func exists(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir()
}

// Kustomize builds a kustomization directory as `kustomize build` (and
// `kubectl kustomize`) does with default options: no plugins, no helm
// charts, no remote bases fetched beyond what the kustomization names.
func Kustomize(dir string) ([]manifest.Rendered, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, errors.New("kustomize build produced no objects")
	}
	return []manifest.Rendered{{File: dir, Content: out}}, nil
}
