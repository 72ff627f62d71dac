//go:build !norender

package render

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/strvals"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/policy/manifest"
)

// ChartsRendered is true in builds that render Helm charts.
const ChartsRendered = true

// releaseName is what `helm template` calls a release when given no name.
const releaseName = "release-name"

// Chart renders a chart directory (or .tgz archive) as `helm template` does:
// values.yaml, then the values files, then --set; subcharts enabled by their
// conditions and tags; the chart's values schema enforced. It returns one
// Rendered per template that produced output, named by its path below the
// chart's parent directory (charts/dsguard/templates/daemonset.yaml), in
// order. NOTES.txt and partials are left out, as helm does.
func Chart(dir string, opts Options) ([]manifest.Rendered, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	if err := checkDependencies(ch); err != nil {
		return nil, err
	}
	vals, err := values(opts)
	if err != nil {
		return nil, err
	}
	name, ns := opts.ReleaseName, opts.Namespace
	if name == "" {
		name = releaseName
	}
	if ns == "" {
		ns = "default"
	}
	if err := chartutil.ProcessDependencies(ch, vals); err != nil {
		return nil, fmt.Errorf("chart dependencies: %w", err)
	}
	top, err := util.ToRenderValues(ch, vals, common.ReleaseOptions{Name: name, Namespace: ns, IsInstall: true, Revision: 1}, nil)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	var out []manifest.Rendered
	for _, key := range sortedKeys(files) {
		base := path.Base(key)
		if strings.HasPrefix(base, "_") || base == "NOTES.txt" || strings.TrimSpace(files[key]) == "" {
			continue
		}
		// key is "<chart name>/templates/x.yaml"; the file on disk is
		// below the chart's directory, whatever the chart is called.
		rel := key
		if i := strings.IndexByte(key, '/'); i >= 0 && !strings.Contains(key[:i], ".") {
			rel = filepath.Join(filepath.Base(filepath.Clean(dir)), key[i+1:])
		}
		out = append(out, manifest.Rendered{File: filepath.Join(parent, rel), Content: []byte(files[key])})
	}
	return out, nil
}

// checkDependencies refuses a chart whose declared subcharts are not in its
// charts/ folder, as helm template does: rendering without them would judge
// less than will be installed.
func checkDependencies(ch *chart.Chart) error {
	var missing []string
	present := map[string]bool{}
	for _, d := range ch.Dependencies() {
		present[d.Name()] = true
	}
	for _, d := range ch.Metadata.Dependencies {
		if !present[d.Name] {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("chart dependencies missing from charts/ (run helm dependency build): %s", strings.Join(missing, ", "))
	}
	return nil
}

// values merges the values files and --set expressions.
func values(opts Options) (map[string]any, error) {
	base := map[string]any{}
	for _, f := range opts.ValuesFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		current := map[string]any{}
		if err := yaml.Unmarshal(data, &current); err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
		base = loader.MergeMaps(base, current)
	}
	for _, s := range opts.Set {
		if err := strvals.ParseInto(s, base); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return base, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
