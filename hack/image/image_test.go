package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// fakeELF is the 64-byte header of a little-endian 64-bit Linux
// executable for machine and nothing else: enough for the image's
// architecture, and a program no test runs.
func fakeELF(machine elf.Machine) []byte {
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT), Ehsize: 64}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, h)
	return b.Bytes()
}

func testSpec(t *testing.T) Spec {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dsguard")
	if err := os.WriteFile(bin, fakeELF(elf.EM_X86_64), 0o755); err != nil {
		t.Fatal(err)
	}
	return Spec{Binary: bin, Path: "/dsguard", Name: "ghcr.io/dsguard/dsguard:test", User: "65532:65532",
		Cmd: []string{"serve"}, CACertificates: true, Version: "test"}
}

// buildImage builds spec's image and returns it with the files it holds.
func buildImage(t *testing.T, spec Spec) (v1.Image, []File) {
	t.Helper()
	files, err := spec.Files()
	if err != nil {
		t.Fatal(err)
	}
	img, err := spec.Image(files)
	if err != nil {
		t.Fatal(err)
	}
	return img, files
}

func TestImage_ConfigRunsNonRootWithoutShell(t *testing.T) {
	spec := testSpec(t)
	img, files := buildImage(t, spec)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || strings.Join(cf.Config.Entrypoint, " ") != "/dsguard" || strings.Join(cf.Config.Cmd, " ") != "serve" {
		t.Errorf("config: user %q entrypoint %q cmd %q", cf.Config.User, cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if !cf.Created.IsZero() && cf.Created.Unix() != 0 {
		t.Errorf("created %v, want the epoch", cf.Created)
	}
	byName := map[string]File{}
	for _, f := range files {
		byName[f.Name] = f
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/env"} {
		if _, ok := byName[shell]; ok {
			t.Errorf("image holds %s", shell)
		}
	}
	if f := byName["dsguard"]; f.Mode != 0o755 {
		t.Errorf("/dsguard mode %v, want 0755", f.Mode)
	}
	if !strings.Contains(string(byName["etc/passwd"].Data), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd does not name uid 65532:\n%s", byName["etc/passwd"].Data)
	}
	pool, n := x509.NewCertPool(), 0
	for rest := byName["etc/ssl/certs/ca-certificates.crt"].Data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("CA bundle: %v", err)
		}
		pool.AddCert(c)
		n++
	}
	if n < 100 {
		t.Errorf("CA bundle holds %d certificates, want Mozilla's roots (over 100)", n)
	}
}

func TestSpec_FilesRejectsBadInput(t *testing.T) {
	good := testSpec(t)
	for name, mutate := range map[string]func(*Spec){
		"relative path":    func(s *Spec) { s.Path = "dsguard" },
		"root path":        func(s *Spec) { s.Path = "/" },
		"named user":       func(s *Spec) { s.User = "nonroot" },
		"missing binary":   func(s *Spec) { s.Binary = filepath.Join(t.TempDir(), "nope") },
		"not an ELF file":  func(s *Spec) { s.Binary = "image.go" },
		"negative user id": func(s *Spec) { s.User = "-1:0" },
	} {
		t.Run(name, func(t *testing.T) {
			s := good
			mutate(&s)
			if _, err := s.Files(); err == nil {
				t.Error("no error")
			}
		})
	}
}

// The Dockerfile copies the -rootfs tree onto scratch; the tree must be the
// layer of `make image`, entry for entry.
func TestWriteRootfs_SameFilesAsLayer(t *testing.T) {
	spec := testSpec(t)
	files, err := spec.Files()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := LayerTar(files)
	if err != nil {
		t.Fatal(err)
	}
	layer := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want root", h.Name, h.Uid, h.Gid)
		}
		data, _ := io.ReadAll(tr)
		layer[strings.TrimSuffix(h.Name, "/")] = describe(h.Typeflag == tar.TypeDir, fs.FileMode(h.Mode&0o777), h.Mode&0o1000 != 0, data)
	}

	root := filepath.Join(t.TempDir(), "rootfs")
	if err := WriteRootfs(root, files); err != nil {
		t.Fatal(err)
	}
	tree := map[string]string{}
	if err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var data []byte
		if !st.IsDir() {
			data, _ = os.ReadFile(p)
		}
		rel, _ := filepath.Rel(root, p)
		tree[filepath.ToSlash(rel)] = describe(st.IsDir(), st.Mode().Perm(), st.Mode()&fs.ModeSticky != 0, data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, want := range layer {
		if got := tree[name]; got != want {
			t.Errorf("%s: layer %s, rootfs %s", name, want, got)
		}
	}
	for name := range tree {
		if _, ok := layer[name]; !ok {
			t.Errorf("%s in the rootfs, not in the layer", name)
		}
	}
}

func describe(isDir bool, perm fs.FileMode, sticky bool, data []byte) string {
	return fmt.Sprintf("dir=%v %v sticky=%v sha256=%x", isDir, perm, sticky, sha256.Sum256(data))
}

// The Dockerfile and `make image` must describe the same image: the final
// stage is scratch plus the -rootfs tree, and both pass the same flags.
func TestDockerfile_SameImageAsMakeImage(t *testing.T) {
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	stages := strings.Split(string(dockerfile), "\nFROM ")
	final := stages[len(stages)-1]
	var instr []string
	for _, l := range strings.Split(final, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			instr = append(instr, l)
		}
	}
	want := []string{"scratch", "COPY --from=build /rootfs/ /", `ENV PATH=/`, "USER 65532:65532", `ENTRYPOINT ["/dsguard"]`, `CMD ["serve"]`}
	if strings.Join(instr, "\n") != strings.Join(want, "\n") {
		t.Errorf("final stage of the Dockerfile:\n%s\nwant:\n%s", strings.Join(instr, "\n"), strings.Join(want, "\n"))
	}
	flags := regexp.MustCompile(`-(path|user|cmd) (\S+)|-ca-certificates`)
	// The flags of each hack/image command line; the Dockerfile's CMD
	// stands for -cmd serve.
	pick := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, "run ./hack/image ") {
				var these []string
				for _, f := range flags.FindAllString(l, -1) {
					if f != "-cmd serve" {
						these = append(these, f)
					}
				}
				out = append(out, strings.Join(these, " "))
			}
		}
		return out
	}
	d, m := pick(string(dockerfile)), pick(string(makefile))
	if len(d) != 1 || d[0] == "" || len(m) < 2 || !strings.Contains(string(makefile), "-cmd serve") {
		t.Fatalf("hack/image in the Dockerfile %q and the Makefile (image and image-index) %q", d, m)
	}
	for _, mm := range m {
		if mm != d[0] {
			t.Errorf("hack/image flags differ: Dockerfile %q, Makefile %q (plus -cmd serve)", d[0], mm)
		}
	}
}
