package framework

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoRoot returns the repository root (the directory holding go.mod).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// ToolsDir returns the directory with kube-apiserver, etcd, kubectl,
// kube-controller-manager and helm: $DSGUARD_TOOLS_DIR, or what
// hack/tools.sh builds (a no-op costing milliseconds once cached).
func ToolsDir(root string) (string, error) {
	if dir := os.Getenv("DSGUARD_TOOLS_DIR"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "tools.sh"), "--print-dir")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/tools.sh: %v: %s", err, stderr.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// BuildDsguard builds the dsguard binary into dir. It is `make build`
// without -trimpath, so that it reuses the packages `go vet` and `go test`
// have already compiled instead of rebuilding the Kubernetes libraries
// (minutes on a cold machine); the Dockerfile path is `make build` itself.
func BuildDsguard(root, dir string) (string, error) { return buildDsguard(root, dir, "") }

// ImageBuildTags are the Go build tags of the container image's binary: the
// Makefile's IMAGE_TAGS and the Dockerfile's TAGS (test/chart holds all
// three together). norender leaves Helm's SDK out.
const ImageBuildTags = "norender"

// BuildImageDsguard builds dsguard as the container image carries it (with
// ImageBuildTags), for the tests and measurements of what a cluster runs.
func BuildImageDsguard(root, dir string) (string, error) {
	return buildDsguard(root, dir, ImageBuildTags)
}

// RaceEnv is the environment variable that, set to 1, builds the dsguard
// the e2e suites run with the race detector (`make race`): a data race in
// serve then prints its report into dsguard's log and makes it exit with
// status 66, which fails the suite when it stops dsguard.
const RaceEnv = "DSGUARD_E2E_RACE"

func buildDsguard(root, dir, tags string) (string, error) {
	bin := filepath.Join(dir, "dsguard")
	args := []string{"build", "-tags", tags, "-ldflags", "-X main.version=e2e", "-o", bin}
	cgo := "CGO_ENABLED=0"
	if os.Getenv(RaceEnv) == "1" {
		args, cgo = append(args, "-race"), "CGO_ENABLED=1"
	}
	cmd := exec.Command("go", append(args, "./cmd/dsguard")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), cgo)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, out)
	}
	return bin, nil
}
