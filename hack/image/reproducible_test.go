//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// makeImage runs the slow half of the reproducibility tests (`make
// image-reproducible`).
var makeImage = flag.Bool("image.make", false, "build the image twice with `make image`, from two copies of the source (minutes with a cold build cache)")

// runAsImageEnv makes the test binary run as the image command, so that the
// tests start it as a process of its own without building it.
const runAsImageEnv = "DSGUARD_TEST_RUN_AS_IMAGE"

func TestMain(m *testing.M) {
	if os.Getenv(runAsImageEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// surroundings are what may differ between two builds of one image besides
// its inputs: where and when it runs, and how the machine is set up.
type surroundings struct {
	// dir is the working directory; tmp is TMPDIR.
	dir, tmp string
	// mtime is given to the inputs (the binary, the source) before the build.
	mtime  time.Time
	umask  string
	tz     string
	locale string
}

// twoSurroundings returns two surroundings under work that differ in every
// respect: paths of different lengths, input times 25 years apart, umasks,
// time zones (one with a 45-minute offset) and locales.
func twoSurroundings(work string) [2]surroundings {
	return [2]surroundings{
		{dir: filepath.Join(work, "a"), tmp: filepath.Join(work, "tmp-a"),
			mtime: time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC), umask: "022", tz: "UTC", locale: "C"},
		{dir: filepath.Join(work, "another", "checkout", "of", "dsguard"), tmp: filepath.Join(work, "elsewhere", "tmp"),
			mtime: time.Now().Add(time.Hour), umask: "077", tz: "Asia/Kathmandu", locale: "C.UTF-8"},
	}
}

// command returns name with args, run in s (its directory, TMPDIR, umask,
// time zone, locale), with SOURCE_DATE_EPOCH set as two rebuilds of one
// commit set it: to the commit's time, the same in both.
func (s surroundings) command(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	for _, d := range []string{s.dir, s.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A build left running would write into the test's directories after
	// their removal: the whole process group (make, go, the linker) is
	// killed when the test ends, and before its deadline.
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-10*time.Second))
		t.Cleanup(cancel)
	}
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `umask "$0" && exec "$@"`, s.umask, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = s.dir
	cmd.Env = append(buildEnv(), "TMPDIR="+s.tmp, "TZ="+s.tz, "LC_ALL="+s.locale, "SOURCE_DATE_EPOCH=1700000000")
	return cmd
}

// laterSecond waits until the wall clock has passed the second of since: a
// time of the build that leaked into the image would then show, also at
// one-second resolution (tar headers, RFC 3339).
func laterSecond(since time.Time) {
	for time.Now().Unix() <= since.Unix() {
		time.Sleep(20 * time.Millisecond)
	}
}

// outputs are what one build wrote: the digest it printed, the archive,
// and every file of the layout and of the root filesystem tree, described.
type outputs struct {
	digest  string
	archive []byte
	files   map[string]string
}

// readOutputs reads what a build wrote: stdout's last word is the digest.
func readOutputs(t *testing.T, stdout, archive string, trees map[string]string) outputs {
	t.Helper()
	words := strings.Fields(stdout)
	if len(words) == 0 || !strings.Contains(words[len(words)-1], "@sha256:") {
		t.Fatalf("the build printed no digest:\n%s", stdout)
	}
	o := outputs{digest: words[len(words)-1], files: map[string]string{}}
	var err error
	if o.archive, err = os.ReadFile(archive); err != nil {
		t.Fatal(err)
	}
	for prefix, root := range trees {
		if err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == root {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			var data []byte
			if !d.IsDir() {
				if data, err = os.ReadFile(p); err != nil {
					return err
				}
			}
			rel, _ := filepath.Rel(root, p)
			desc := fmt.Sprintf("sha256 %x", sha256.Sum256(data))
			if prefix == "rootfs" {
				// The Dockerfile copies this tree with its modes and times.
				desc += fmt.Sprintf(" mode %v mtime %v", info.Mode(), info.ModTime().UTC())
			}
			o.files[prefix+"/"+filepath.ToSlash(rel)] = desc
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// compareOutputs fails the test where two builds wrote different things.
func compareOutputs(t *testing.T, a, b outputs) {
	t.Helper()
	if a.digest != b.digest {
		t.Errorf("two builds of the same inputs, different digests:\n  %s\n  %s", a.digest, b.digest)
	}
	if !bytes.Equal(a.archive, b.archive) {
		t.Errorf("the OCI archives differ (sha256 %x and %x)", sha256.Sum256(a.archive), sha256.Sum256(b.archive))
	}
	// Blobs are named by digest: beyond the digests, only the rest says
	// something new.
	for _, name := range slices.Sorted(maps.Keys(a.files)) {
		if other, ok := b.files[name]; !ok {
			if a.digest == b.digest || !strings.HasPrefix(name, "oci/blobs/") {
				t.Errorf("%s: written by the first build only", name)
			}
		} else if other != a.files[name] {
			t.Errorf("%s differs: %s, then %s", name, a.files[name], other)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(b.files)) {
		if _, ok := a.files[name]; !ok && (a.digest == b.digest || !strings.HasPrefix(name, "oci/blobs/")) {
			t.Errorf("%s: written by the second build only", name)
		}
	}
}

// TestImage_SameBytesFromAnotherProcessPlaceAndTime: hack/image writes the
// same image, archive, layout and root filesystem tree for the same binary
// when it runs as another process, in another directory, with another
// TMPDIR, umask, time zone and locale, at a later second, reading the
// binary from another path with another mode and time.
func TestImage_SameBytesFromAnotherProcessPlaceAndTime(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binary := fakeELF(elf.EM_X86_64)
	var results []outputs
	var last time.Time
	for i, s := range twoSurroundings(t.TempDir()) {
		if i > 0 {
			laterSecond(last)
		}
		bin := filepath.Join(s.dir, "input", "dsguard")
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, binary, []fs.FileMode{0o755, 0o700}[i]); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(bin, s.mtime, s.mtime); err != nil {
			t.Fatal(err)
		}
		// The flags of the Makefile's image target, outputs relative to
		// the working directory.
		cmd := s.command(t, self, "-binary", bin, "-path", "/dsguard", "-user", "65532:65532", "-ca-certificates", "-cmd", "serve",
			"-name", "ghcr.io/dsguard/dsguard:test", "-version", "test",
			"-oci-layout", "out/oci", "-archive", "out/dsguard.oci.tar", "-rootfs", "out/rootfs")
		cmd.Env = append(cmd.Env, runAsImageEnv+"=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("hack/image in %s: %v\n%s", s.dir, err, stderr.String())
		}
		last = time.Now()
		out := filepath.Join(s.dir, "out")
		results = append(results, readOutputs(t, stdout.String(), filepath.Join(out, "dsguard.oci.tar"),
			map[string]string{"oci": filepath.Join(out, "oci"), "rootfs": filepath.Join(out, "rootfs")}))
	}
	compareOutputs(t, results[0], results[1])
}

// TestMakeImage_SameDigestWhereverAndWheneverBuilt: `make image` is
// reproducible: two builds of the same source, each a process of its own,
// from copies of the source at different paths, in the two surroundings of
// the test above (source file times included), at different seconds, give
// the same binary, digest, archive and layout. Everything that can differ
// between two machines building one commit differs, except the Go
// toolchain and its build cache (shared: the second build costs a link).
// The copies carry no .git: VERSION is given, and the toolchain stamps no
// VCS information, which is part of the source (the commit and its time),
// not of the surroundings.
//
// It runs with -image.make (`make image-reproducible`): with the build
// cache warm it takes under a minute, but `make build` compiles with
// -trimpath, which nothing else in `make test` does, so on a cold cache it
// compiles every dependency once more (minutes).
func TestMakeImage_SameDigestWhereverAndWheneverBuilt(t *testing.T) {
	if !*makeImage {
		t.Skip("builds the image twice with make from two copies of the source: run with -args -image.make (make image-reproducible)")
	}
	for _, tool := range []string{"make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: %v", tool, err)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var results []outputs
	var binaries [][]byte
	var last time.Time
	for i, s := range twoSurroundings(t.TempDir()) {
		copySource(t, root, s.dir, s.mtime)
		if i > 0 {
			laterSecond(last)
		}
		out := filepath.Join(s.tmp, "..", fmt.Sprintf("bin-%d", i))
		cmd := s.command(t, "make", "-s", "image", "VERSION=v0.0.0-reproducible", "BIN_DIR="+out)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("make image in %s: %v\n%s%s", s.dir, err, stdout.String(), stderr.String())
		}
		last = time.Now()
		t.Logf("build %d: make image in %v", i+1, last.Sub(start).Round(time.Millisecond))
		image := filepath.Join(out, "image")
		results = append(results, readOutputs(t, stdout.String(), filepath.Join(image, "dsguard.oci.tar"),
			map[string]string{"oci": filepath.Join(image, "oci")}))
		bin, err := os.ReadFile(filepath.Join(image, "dsguard"))
		if err != nil {
			t.Fatal(err)
		}
		binaries = append(binaries, bin)
	}
	if !bytes.Equal(binaries[0], binaries[1]) {
		t.Errorf("the binaries differ (sha256 %x and %x): go build takes something from where or when it runs (-trimpath?)",
			sha256.Sum256(binaries[0]), sha256.Sum256(binaries[1]))
	}
	compareOutputs(t, results[0], results[1])
}

// buildEnv is the test's environment without what ties a make to the one
// that may have started the test (its jobserver, its flags) or sets where
// and when a build happens (set per build).
func buildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "TMPDIR", "GOTMPDIR", "TZ", "LC_ALL", "LANG", "SOURCE_DATE_EPOCH":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// copySource copies the module at root to dst as a fresh checkout holds it
// (no .git, no build output), every file and directory with mtime.
func copySource(t *testing.T, root, dst string, mtime time.Time) {
	t.Helper()
	skip := map[string]bool{".git": true, "bin": true, "dist": true, "zz_tmpgen": true, "load": true, "dsguard": true}
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if (filepath.Dir(rel) == "." && skip[rel]) || strings.HasSuffix(rel, ".test") || strings.HasSuffix(rel, ".out") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			dirs = append(dirs, target)
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, data, info.Mode().Perm()); err != nil {
				return err
			}
			return os.Chtimes(target, mtime, mtime)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("copying the source to %s: %v", dst, err)
	}
	// Children first: writing into a directory sets its mtime.
	for _, d := range slices.Backward(dirs) {
		if err := os.Chtimes(d, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "go.mod")); err != nil {
		t.Fatalf("copying the source to %s: %v", dst, err)
	}
}
