package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// semver is a release version without the tag's "v".
var semver = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// TestVersion_OneConvention holds one version convention: the git tag is
// vX.Y.Z; the chart's version and appVersion, the image the chart deploys
// by default, the image `make image` builds and tags, and what a binary
// says (`make build`, GoReleaser, the Dockerfile) are all X.Y.Z, and
// hack/release/set-version.sh writes it so.
func TestVersion_OneConvention(t *testing.T) {
	root := filepath.Join("..", "..")
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, filepath.Join(root, "charts", "dsguard", "Chart.yaml"), &chart)
	if !semver.MatchString(chart.Version) || chart.AppVersion != chart.Version {
		t.Errorf("Chart.yaml: version %q, appVersion %q; want one X.Y.Z in both", chart.Version, chart.AppVersion)
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	readYAML(t, filepath.Join(root, "charts", "dsguard", "values.yaml"), &values)
	if values.Image.Tag != "" {
		t.Errorf("values.yaml image.tag = %q; empty deploys appVersion, the release's own image", values.Image.Tag)
	}
	deployed := values.Image.Repository + ":" + chart.AppVersion

	// make image and make build for the tag v<appVersion>, as a dry run.
	cmd := exec.Command("make", "-n", "image", "VERSION=v"+chart.AppVersion)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n image: %v\n%s", err, out)
	}
	for _, want := range []string{"-X main.version=" + chart.AppVersion + "'", "-name " + deployed + " ", "-version " + chart.AppVersion + " "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make image for tag v%s does not pass %q:\n%s", chart.AppVersion, want, out)
		}
	}
	// The release's image index and what publish.sh pushes and stamps into
	// the chart: the same X.Y.Z, both architectures named by platform.
	cmd = exec.Command("make", "-n", "image-index", "release-publish", "VERSION=v"+chart.AppVersion)
	cmd.Dir = root
	if out, err = cmd.CombinedOutput(); err != nil {
		t.Fatalf("make -n image-index release-publish: %v\n%s", err, out)
	}
	for _, want := range []string{"-name " + deployed + " ", "--version " + chart.AppVersion + " ",
		"-binary linux/amd64=", "-binary linux/arm64=", "--binary linux/amd64=", "--binary linux/arm64="} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make image-index release-publish for tag v%s does not pass %q:\n%s", chart.AppVersion, want, out)
		}
	}
	goreleaser, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// GoReleaser's .Version is the tag without its "v"; .Tag keeps it.
	if !strings.Contains(string(goreleaser), "-X main.version={{ .Version }}") {
		t.Error(".goreleaser.yaml does not stamp binaries with {{ .Version }}")
	}

	// set-version.sh on a copy of the files it writes.
	dir := t.TempDir()
	for _, f := range []string{"hack/release/set-version.sh", "charts/dsguard/Chart.yaml", "action.yml", "README.md", "docs/install.md", "docs/cli.md"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("bash", filepath.Join(dir, "hack/release/set-version.sh"), "v9.8.7").CombinedOutput(); err != nil {
		t.Fatalf("set-version.sh v9.8.7: %v\n%s", err, out)
	}
	released := chart.Version
	readYAML(t, filepath.Join(dir, "charts", "dsguard", "Chart.yaml"), &chart)
	// Every install command the README gives names the new release: none is left at the old one.
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(readme)) {
		if strings.Contains(line, released) {
			t.Errorf("after set-version.sh v9.8.7, README.md still names %s: %s", released, strings.TrimSpace(line))
		}
	}
	if chart.Version != "9.8.7" || chart.AppVersion != "9.8.7" {
		t.Errorf("after set-version.sh v9.8.7: version %q, appVersion %q; want 9.8.7", chart.Version, chart.AppVersion)
	}
	for file, wants := range map[string][]string{
		"README.md": {"oci://ghcr.io/dsguard/charts/dsguard --version 9.8.7 ", "cmd/dsguard@v9.8.7",
			"dsguard/v9.8.7/hack/release/install.sh", "install.sh v9.8.7 "},
		"docs/install.md": {"--version 9.8.7 ", "ghcr.io/dsguard/charts/dsguard:9.8.7", "ghcr.io/dsguard/dsguard:9.8.7"},
		"docs/cli.md":     {"dsguard/dsguard@v9.8.7", "rev: v9.8.7", "cmd/dsguard@v9.8.7"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(string(b), want) {
				t.Errorf("after set-version.sh v9.8.7, %s lacks %q", file, want)
			}
		}
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
