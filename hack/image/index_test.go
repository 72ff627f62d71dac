package main

import (
	"debug/elf"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// archImages builds the test image once per machine, in that order.
func archImages(t *testing.T, machines ...elf.Machine) []v1.Image {
	t.Helper()
	var out []v1.Image
	for _, m := range machines {
		spec := testSpec(t)
		if err := os.WriteFile(spec.Binary, fakeELF(m), 0o755); err != nil {
			t.Fatal(err)
		}
		img, _ := buildImage(t, spec)
		out = append(out, img)
	}
	return out
}

func TestELFArch(t *testing.T) {
	for _, tc := range []struct {
		bin     []byte
		want    string
		wantErr string
	}{
		{bin: fakeELF(elf.EM_X86_64), want: "amd64"},
		{bin: fakeELF(elf.EM_AARCH64), want: "arm64"},
		{bin: fakeELF(elf.EM_ARM), wantErr: "EM_ARM"},
		{bin: []byte("#!/bin/sh\n"), wantErr: "ELF header"},
	} {
		got, err := ELFArch(tc.bin)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ELFArch: got %q, %v; want an error naming %q", got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ELFArch: got %q, %v; want %q", got, err, tc.want)
		}
	}
}

// The index names each image's platform from its binary, in a fixed order:
// the same binaries given in another order give the same digest.
func TestIndex_OneImagePerArchitecture(t *testing.T) {
	imgs := archImages(t, elf.EM_AARCH64, elf.EM_X86_64)
	idx, err := Index(imgs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex || len(m.Manifests) != 2 {
		t.Fatalf("index: media type %s with %d manifests, want an OCI index of 2", m.MediaType, len(m.Manifests))
	}
	for i, arch := range []string{"amd64", "arm64"} {
		d := m.Manifests[i]
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch {
			t.Errorf("manifest %d: platform %+v, want linux/%s", i, d.Platform, arch)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if cf, _ := img.ConfigFile(); cf.Architecture != arch {
			t.Errorf("manifest %d: config says %s, want %s", i, cf.Architecture, arch)
		}
	}
	again, err := Index([]v1.Image{imgs[1], imgs[0]})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("the order of the binaries changed the digest: %s, then %s", d1, d2)
	}
	if _, err := Index(archImages(t, elf.EM_X86_64, elf.EM_X86_64)); err == nil || !strings.Contains(err.Error(), "two binaries for linux/amd64") {
		t.Errorf("two amd64 binaries: got %v, want an error", err)
	}
}

// Push writes the index to a registry (one in the test process, spoken to
// over plain HTTP as localhost) and returns the reference by digest; pulling
// it back by that digest gives the same index and images.
func TestPush_IndexByDigest(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.Replace(strings.TrimPrefix(srv.URL, "http://"), "127.0.0.1", "localhost", 1)
	idx, err := Index(archImages(t, elf.EM_X86_64, elf.EM_AARCH64))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Push(host+"/dsguard/dsguard:1.2.3", idx)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if ref != host+"/dsguard/dsguard@"+want.String() {
		t.Fatalf("Push returned %s, want the repository by digest %s", ref, want)
	}
	for _, r := range []string{ref, host + "/dsguard/dsguard:1.2.3"} {
		parsed, err := name.ParseReference(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Index(parsed)
		if err != nil {
			t.Fatalf("pulling %s: %v", r, err)
		}
		if d, _ := got.Digest(); d != want {
			t.Errorf("%s: digest %s, want %s", r, d, want)
		}
		m, _ := got.IndexManifest()
		for _, desc := range m.Manifests {
			if _, err := got.Image(desc.Digest); err != nil {
				t.Errorf("%s: image %s: %v", r, desc.Platform.Architecture, err)
			}
		}
	}
	if _, err := Push(host+"/dsguard/dsguard", idx); err == nil {
		t.Error("a push without a tag: want an error")
	}
}

// main with two -binary flags writes an index into the layout.
func TestRun_TwoBinariesWriteAnIndex(t *testing.T) {
	dir := t.TempDir()
	var args []string
	for i, m := range []elf.Machine{elf.EM_X86_64, elf.EM_AARCH64} {
		bin := filepath.Join(dir, []string{"amd64", "arm64"}[i])
		if err := os.WriteFile(bin, fakeELF(m), 0o755); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-binary", bin)
	}
	layoutDir := filepath.Join(dir, "oci")
	if err := run(append(args, "-path", "/dsguard", "-name", "dsguard.local/dsguard:e2e", "-oci-layout", layoutDir)); err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(layoutDir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(index), string(types.OCIImageIndex)) {
		t.Errorf("the layout's index.json does not point at an image index:\n%s", index)
	}
	// Named by platform, each binary's ELF header must agree.
	named := []string{"-binary", "linux/amd64=" + filepath.Join(dir, "amd64"), "-binary", "linux/arm64=" + filepath.Join(dir, "arm64")}
	if err := run(append(named, "-path", "/dsguard", "-oci-layout", layoutDir)); err != nil {
		t.Errorf("binaries named by their platforms: %v", err)
	}
	swapped := []string{"-binary", "linux/arm64=" + filepath.Join(dir, "amd64"), "-binary", "linux/amd64=" + filepath.Join(dir, "arm64")}
	err = run(append(swapped, "-path", "/dsguard", "-oci-layout", layoutDir))
	if err == nil || !strings.Contains(err.Error(), "was given as linux/arm64, but its ELF header says linux/amd64") {
		t.Errorf("mislabelled binaries: got %v, want the ELF header's objection", err)
	}
	if err := run(append(args, "-path", "/dsguard", "-rootfs", filepath.Join(dir, "rootfs"))); err == nil {
		t.Error("-rootfs with two binaries: want an error")
	}
}
