package chart

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/render"
	"github.com/dsguard/dsguard/test/e2e/framework"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// TestDockerfile_BuildStageRunsMakeBuild: no Docker engine runs here, so the
// image is proven by its parts. The build stage runs `make build` and nothing
// else compiles but hack/image, which writes the image's files around that
// binary; the runtime stage is scratch, non-root, and copies exactly that tree. Then the build stage's own command runs here
// and must give a static, version-stamped binary.
func TestDockerfile_BuildStageRunsMakeBuild(t *testing.T) {
	e := setup(t)
	ins := parseDockerfile(t, filepath.Join(e.root, "Dockerfile"))

	var stage string
	var makeCmd, imageCmd []string
	var runtimeFrom, copyFrom, user string
	for _, in := range ins {
		switch in.cmd {
		case "FROM":
			f := strings.Fields(in.args)
			stage = ""
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				stage = f[2]
			} else {
				runtimeFrom = f[0]
			}
		case "RUN":
			if stage != "build" {
				t.Errorf("RUN outside the build stage: %s", in.args)
				continue
			}
			for _, part := range strings.Split(in.args, "&&") {
				f := strings.Fields(part)
				switch {
				case len(f) >= 2 && f[0] == "make" && f[1] == "build":
					makeCmd = f
				case len(f) >= 3 && f[0] == "go" && f[1] == "run" && f[2] == "./hack/image":
					imageCmd = f
				case strings.TrimSpace(part) == "go mod download":
				default:
					t.Errorf("the build stage runs %q besides `make build` and hack/image: the image would not be what `make image` builds", part)
				}
			}
		case "COPY":
			if strings.HasPrefix(in.args, "--from=build ") {
				copyFrom = strings.Fields(in.args)[1]
			}
		case "USER":
			user = in.args
		}
	}
	if makeCmd == nil {
		t.Fatal("the build stage does not run `make build`")
	}
	// The image's binary is built with the image's build tags, the same in
	// the Dockerfile, the Makefile (IMAGE_TAGS, which `make image` passes)
	// and the tests and load harness (framework.ImageBuildTags).
	tags := ""
	for _, a := range makeCmd[2:] {
		if v, ok := strings.CutPrefix(a, "TAGS="); ok {
			tags = v
		}
	}
	makefile, err := os.ReadFile(filepath.Join(e.root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "IMAGE_TAGS := " + framework.ImageBuildTags + "\n"; !strings.Contains(string(makefile), want) {
		t.Errorf("the Makefile does not set %q", strings.TrimSpace(want))
	}
	if !strings.Contains(string(makefile), "build BIN_DIR=$(IMAGE_DIR) GOOS=linux TAGS=$(IMAGE_TAGS)") {
		t.Error("`make image` does not build with TAGS=$(IMAGE_TAGS)")
	}
	if tags != framework.ImageBuildTags {
		t.Errorf("the Dockerfile builds with TAGS=%q, the image's tags are %q", tags, framework.ImageBuildTags)
	}
	if runtimeFrom != "scratch" {
		t.Errorf("runtime image %q, want scratch plus the files hack/image writes", runtimeFrom)
	}
	if user == "" || strings.HasPrefix(user, "0") || user == "root" {
		t.Errorf("USER %q, want a non-root user", user)
	}
	binDir := ""
	for _, a := range makeCmd[2:] {
		if v, ok := strings.CutPrefix(a, "BIN_DIR="); ok {
			binDir = v
		}
	}
	// hack/image packs the binary make wrote into the tree the runtime stage
	// copies (hack/image's own tests hold that tree to `make image`'s layer).
	flag := func(name string) string {
		for i := range len(imageCmd) - 1 {
			if imageCmd[i] == name {
				return imageCmd[i+1]
			}
		}
		return ""
	}
	if binDir == "" || flag("-binary") != binDir+"/dsguard" {
		t.Errorf("hack/image packs %q, make writes %s/dsguard", flag("-binary"), binDir)
	}
	if rootfs := flag("-rootfs"); rootfs == "" || copyFrom != rootfs+"/" {
		t.Errorf("the runtime stage copies %q, hack/image writes %q", copyFrom, rootfs)
	}

	// Run the build stage's command, with this test's VERSION and BIN_DIR.
	out := t.TempDir()
	args := []string{"-s"}
	for _, a := range makeCmd[1:] {
		switch {
		case strings.HasPrefix(a, "VERSION="):
			a = "VERSION=v0.0.0-dockerfile-test"
		case strings.HasPrefix(a, "BIN_DIR="):
			a = "BIN_DIR=" + out
		}
		args = append(args, a)
	}
	cmd := exec.Command("make", args...)
	cmd.Dir = e.root
	// As in the golang image: CGO_ENABLED unset, so the Makefile's default holds.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CGO_ENABLED=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	bin := filepath.Join(out, "dsguard")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a dynamic loader (PT_INTERP): not static, it cannot run on an empty base")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary links %v: not static", libs)
	}
	v := e.run(bin, "version")
	// `dsguard version` prints "dsguard <version> (<go>, <platform>, without
	// Helm chart rendering)".
	// The tag's form goes in, the release's comes out (TestVersion_OneConvention).
	if f := strings.Fields(v.stdout); v.err != nil || len(f) < 2 || f[1] != "0.0.0-dockerfile-test" {
		t.Errorf("dsguard version = %q (%v), want the stamped 0.0.0-dockerfile-test", v.stdout, v.err)
	}
	if !strings.Contains(v.stdout, "without Helm chart rendering") {
		t.Errorf("dsguard version = %q: the image's binary does not say it leaves Helm out", v.stdout)
	}
	// The tags took: a chart is refused with the way around it, not rendered.
	c := e.run(bin, "check", filepath.Join(e.root, "charts", "dsguard"))
	if c.err == nil || !strings.Contains(c.stdout+c.stderr, render.ErrNoCharts.Error()) {
		t.Errorf("the image's dsguard check of a chart: %v\n%s%s\nwant it refused with %q", c.err, c.stdout, c.stderr, render.ErrNoCharts)
	}
}
