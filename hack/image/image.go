package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// epoch is the time of every file and of the image: a build at another
// moment must give the same bytes.
var epoch = time.Unix(0, 0).UTC()

// Spec describes an image of one static binary.
type Spec struct {
	// Binary is the file on disk; Path is where it lands in the image and
	// the entrypoint.
	Binary, Path string
	// Name is the image reference recorded in the layout's index.
	Name string
	// User is "uid:gid"; /etc/passwd and /etc/group name it "nonroot"
	// unless it is 0.
	User string
	// Cmd is the default argument list.
	Cmd []string
	// CACertificates adds Mozilla's root certificates.
	CACertificates bool
	// Version is the org.opencontainers.image.version label.
	Version string
	// Platform, when set (linux/arm64), is what the binary must be built
	// for: a release that names its binaries by platform fails on a
	// mislabelled one instead of publishing it.
	Platform string
}

// File is one entry of the image's single layer.
type File struct {
	Name string // relative, slash separated, no leading slash
	Mode fs.FileMode
	Data []byte // nil for a directory
}

func dir(name string, mode fs.FileMode) File { return File{Name: name, Mode: mode | fs.ModeDir} }

// Files returns the layer's entries in the order they are written, parents
// before children. Every entry is owned by root: nothing in the image is
// writable by the user the container runs as.
func (s Spec) Files() ([]File, error) {
	uid, gid, err := s.ids()
	if err != nil {
		return nil, err
	}
	if !path.IsAbs(s.Path) || path.Clean(s.Path) != s.Path || s.Path == "/" {
		return nil, fmt.Errorf("-path %q: want an absolute file path such as /dsguard", s.Path)
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return nil, fmt.Errorf("%s is not an ELF binary", s.Binary)
	}
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n"
	group := "root:x:0:\n"
	if uid != 0 {
		passwd += fmt.Sprintf("nonroot:x:%d:%d:nonroot:/nonexistent:/sbin/nologin\n", uid, gid)
	}
	if gid != 0 {
		group += fmt.Sprintf("nonroot:x:%d:\n", gid)
	}
	files := []File{
		dir("etc", 0o755),
		{Name: "etc/group", Mode: 0o644, Data: []byte(group)},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(passwd)},
	}
	if s.CACertificates {
		files = append(files,
			dir("etc/ssl", 0o755),
			dir("etc/ssl/certs", 0o755),
			File{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: caBundle()},
		)
	}
	// Go's os.TempDir; the root filesystem is usually read-only, where a
	// Pod mounts an emptyDir here if it needs one.
	files = append(files, dir("tmp", 0o1777))
	rel := strings.TrimPrefix(s.Path, "/")
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		files = append(files, dir(d, 0o755))
	}
	files = append(files, File{Name: rel, Mode: 0o755, Data: bin})
	sort.SliceStable(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

func (s Spec) ids() (uid, gid int, err error) {
	u, g, ok := strings.Cut(s.User, ":")
	if ok {
		uid, err = strconv.Atoi(u)
		if err == nil {
			gid, err = strconv.Atoi(g)
		}
	}
	if !ok || err != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("-user %q: want numeric uid:gid such as 65532:65532", s.User)
	}
	return uid, gid, nil
}

// caBundle is Mozilla's trust store as Go's x509roots/fallback module ships
// it, as PEM. Roots that carry a distrust date are left out: a PEM file
// cannot express that constraint, and trusting them without it would be
// wider than the store intends.
func caBundle() []byte {
	var b bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return b.Bytes()
}

// LayerTar returns the uncompressed layer.
func LayerTar(files []File) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.Name, Mode: int64(f.Mode.Perm()), ModTime: epoch, Format: tar.FormatPAX}
		if f.Mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		if f.Mode.IsDir() {
			h.Typeflag, h.Name = tar.TypeDir, f.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Image assembles the OCI image: one gzip layer, a config with the user,
// entrypoint and labels, every timestamp at the epoch.
func (s Spec) Image(files []File) (v1.Image, error) {
	raw, err := LayerTar(files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/image", Comment: "static binary " + s.Path},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	arch, err := s.arch(files)
	if err != nil {
		return nil, err
	}
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: epoch}
	labels := map[string]string{"org.opencontainers.image.source": "https://github.com/dsguard/dsguard"}
	if s.Version != "" {
		labels["org.opencontainers.image.version"] = s.Version
	}
	cf.Config = v1.Config{
		User:       s.User,
		Entrypoint: []string{s.Path},
		Cmd:        s.Cmd,
		Env:        []string{"PATH=/"},
		WorkingDir: "/",
		Labels:     labels,
	}
	return mutate.ConfigFile(img, cf)
}

// goArch names the architectures a release builds for by their ELF machine.
var goArch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
}

// arch reads the image's architecture off the binary's ELF header, not off
// the machine building the image: an arm64 binary cross-compiled here must
// not be labelled amd64, or a node would pull an image it cannot run.
func (s Spec) arch(files []File) (string, error) {
	rel := strings.TrimPrefix(s.Path, "/")
	i := slices.IndexFunc(files, func(f File) bool { return f.Name == rel })
	if i < 0 {
		return "", fmt.Errorf("the image holds no %s", s.Path)
	}
	arch, err := ELFArch(files[i].Data)
	if err == nil && s.Platform != "" && s.Platform != "linux/"+arch {
		err = fmt.Errorf("%s was given as %s, but its ELF header says linux/%s", s.Binary, s.Platform, arch)
	}
	return arch, err
}

// ELFArch returns the Go architecture of a Linux ELF executable.
func ELFArch(bin []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", fmt.Errorf("reading the binary's ELF header: %w", err)
	}
	arch, ok := goArch[f.Machine]
	if !ok || f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB && f.Machine != elf.EM_S390 {
		return "", fmt.Errorf("the binary is for %v (%v, %v), not an architecture a release names", f.Machine, f.Class, f.Data)
	}
	return arch, nil
}

// Index puts images of the same program for several architectures into one
// OCI image index, in a fixed order (by architecture), so that a node pulls
// the one for its own and equal images give an equal index.
func Index(images []v1.Image) (v1.ImageIndex, error) {
	type entry struct {
		arch string
		img  v1.Image
	}
	var entries []entry
	for _, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(entries, func(e entry) bool { return e.arch == cf.Architecture }) {
			return nil, fmt.Errorf("two binaries for %s/%s", cf.OS, cf.Architecture)
		}
		entries = append(entries, entry{cf.Architecture, img})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.arch, b.arch) })
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, e := range entries {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: e.img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: "linux", Architecture: e.arch},
		}})
	}
	return idx, nil
}

// annotations name the image in the layout's index: containerd's importer
// reads io.containerd.image.name, other tools the OCI ref name.
func annotations(name string) map[string]string {
	if name == "" {
		return nil
	}
	return map[string]string{"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name}
}

// Artifact is what a layout, an archive or a push holds: a v1.Image, or a
// v1.ImageIndex of one image per architecture.
type Artifact interface {
	Digest() (v1.Hash, error)
}

// WriteLayout replaces dir with an OCI image layout holding a.
func WriteLayout(dir string, a Artifact, name string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	switch a := a.(type) {
	case v1.Image:
		return p.AppendImage(a, layout.WithAnnotations(annotations(name)))
	case v1.ImageIndex:
		return p.AppendIndex(a, layout.WithAnnotations(annotations(name)))
	}
	return fmt.Errorf("cannot write a %T", a)
}

// WriteArchive writes a as a tar of its OCI image layout, entries sorted
// and timestamps at the epoch, so equal images give equal files.
func WriteArchive(file string, a Artifact, name string) error {
	tmp, err := os.MkdirTemp("", "image-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "layout")
	if err := WriteLayout(root, a, name); err != nil {
		return err
	}
	var names []string
	if err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		names = append(names, filepath.ToSlash(rel))
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(names)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	for _, n := range names {
		st, err := os.Stat(filepath.Join(root, n))
		if err != nil {
			out.Close()
			return err
		}
		h := &tar.Header{Name: n, Mode: 0o644, ModTime: epoch, Format: tar.FormatPAX}
		if st.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, n+"/", 0o755
		} else {
			h.Typeflag, h.Size = tar.TypeReg, st.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			out.Close()
			return err
		}
		if !st.IsDir() {
			data, err := os.ReadFile(filepath.Join(root, n))
			if err != nil {
				out.Close()
				return err
			}
			if _, err := tw.Write(data); err != nil {
				out.Close()
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// WriteRootfs writes the files under dir (which must not exist or be empty)
// with their modes, for a Dockerfile to COPY onto scratch.
func WriteRootfs(dir string, files []File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if f.Mode.IsDir() {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		} else if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
		// Set explicitly: the umask must not decide the image's modes.
		if err := os.Chmod(p, f.Mode&(fs.ModePerm|fs.ModeSticky)); err != nil {
			return err
		}
	}
	// Children first: writing an entry into a directory sets the
	// directory's time to now, which a COPY of the tree would carry into
	// the image.
	for _, f := range slices.Backward(files) {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.Chtimes(p, epoch, epoch); err != nil {
			return err
		}
	}
	return nil
}
