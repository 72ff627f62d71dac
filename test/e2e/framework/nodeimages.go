package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Image is a container image built on this machine by hack/image.
type Image struct {
	// Ref is the reference the image is imported under, e.g. dsguard.local/dsguard:e2e.
	Ref string
	// Archive is the OCI archive to import.
	Archive string
}

// Repository and Tag split Ref for a chart's image values.
func (i Image) Repository() string { r, _, _ := strings.Cut(i.Ref, ":"); return r }

// Tag is the part of Ref after the colon.
func (i Image) Tag() string { _, t, _ := strings.Cut(i.Ref, ":"); return t }

// BuildNodeImages builds, into dir, the dsguard image as `make image` does
// (ref dsguard.local/dsguard:e2e, from the binary at dsguardBin) and the
// pause image the node's sandboxes use (PauseImage).
func BuildNodeImages(root, dir, dsguardBin string) (dsguard, pause Image, err error) {
	pauseBin := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", pauseBin, "./hack/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Image{}, Image{}, fmt.Errorf("go build ./hack/pause: %v: %s", err, out)
	}
	tool := filepath.Join(dir, "image")
	cmd = exec.Command("go", "build", "-o", tool, "./hack/image")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return Image{}, Image{}, fmt.Errorf("go build ./hack/image: %v: %s", err, out)
	}
	dsguard = Image{Ref: "dsguard.local/dsguard:e2e", Archive: filepath.Join(dir, "dsguard.oci.tar")}
	pause = Image{Ref: PauseImage, Archive: filepath.Join(dir, "pause.oci.tar")}
	for _, b := range []struct {
		img  Image
		args []string
	}{
		// The flags of the Makefile's image target.
		{dsguard, []string{"-binary", dsguardBin, "-path", "/dsguard", "-user", "65532:65532", "-ca-certificates", "-cmd", "serve"}},
		// The kubelet's pause image runs as 65535.
		{pause, []string{"-binary", pauseBin, "-path", "/pause", "-user", "65535:65535"}},
	} {
		args := append(b.args, "-name", b.img.Ref, "-archive", b.img.Archive)
		if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
			return Image{}, Image{}, fmt.Errorf("hack/image %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return dsguard, pause, nil
}
