// Command image writes a container image of one static binary without a
// Docker engine: an OCI image layout (and an OCI archive of it) on an empty
// base, with the files a Go server needs and nothing else (no shell, no
// package manager). The same inputs give the same bytes, so the same digest.
//
//	go run ./hack/image -binary bin/image/dsguard -path /dsguard -name ghcr.io/dsguard/dsguard:v0.1.0 \
//	  -user 65532:65532 -ca-certificates -cmd serve -archive bin/image/dsguard.oci.tar
//
// With -rootfs it writes the same files as a directory tree instead; the
// Dockerfile copies that tree onto scratch, so a Docker build and `make image`
// hold the same filesystem.
//
// Given -binary more than once (one static binary per architecture, each
// named by its ELF header), it writes one OCI image index of them; -push
// writes the image or index to a registry under a tag and prints it by
// digest (hack/release/publish.sh, which a release's workflow runs):
//
//	go run ./hack/image -binary dist/linux-amd64/dsguard -binary dist/linux-arm64/dsguard \
//	  -path /dsguard -ca-certificates -cmd serve -push ghcr.io/dsguard/dsguard:1.2.3
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var spec Spec
	var layoutDir, archive, rootfs, cmd, push string
	var binaries []string
	fs.Func("binary", "static binary to put in the image (required); repeated, one per architecture, for an image index; "+
		"as linux/ARCH=FILE it must be a binary for ARCH (its ELF header is checked)", func(v string) error {
		binaries = append(binaries, v)
		return nil
	})
	fs.StringVar(&spec.Path, "path", "", "absolute path of the binary in the image, also the entrypoint (required)")
	fs.StringVar(&spec.Name, "name", "", "image reference recorded in the layout, e.g. ghcr.io/dsguard/dsguard:v0.1.0")
	fs.StringVar(&spec.User, "user", "65532:65532", "uid:gid the container runs as")
	fs.BoolVar(&spec.CACertificates, "ca-certificates", false, "add /etc/ssl/certs/ca-certificates.crt (Mozilla's roots, pinned by go.mod)")
	fs.StringVar(&cmd, "cmd", "", "default arguments (space separated)")
	fs.StringVar(&spec.Version, "version", "", "value of the org.opencontainers.image.version label")
	fs.StringVar(&layoutDir, "oci-layout", "", "directory to write the OCI image layout to (replaced)")
	fs.StringVar(&archive, "archive", "", "file to write the OCI layout to as a tar archive (for `ctr images import`, `docker load`, `skopeo copy oci-archive:`)")
	fs.StringVar(&rootfs, "rootfs", "", "directory to write the image's files to instead (the Dockerfile's input)")
	fs.StringVar(&push, "push", "", "registry tag to push the image (or index) to, e.g. ghcr.io/dsguard/dsguard:1.2.3; "+
		"credentials from the Docker config (docker login), plain HTTP for localhost")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cmd != "" {
		spec.Cmd = strings.Fields(cmd)
	}
	if len(binaries) == 0 || spec.Path == "" {
		return fmt.Errorf("-binary and -path are required")
	}
	if layoutDir == "" && archive == "" && rootfs == "" && push == "" {
		return fmt.Errorf("nothing to write: give -oci-layout, -archive, -rootfs or -push")
	}
	if rootfs != "" && len(binaries) > 1 {
		return fmt.Errorf("-rootfs takes one -binary: a directory tree holds one architecture")
	}
	if push != "" && spec.Name == "" {
		spec.Name = push
	}
	var images []v1.Image
	for _, b := range binaries {
		spec.Binary, spec.Platform = b, ""
		if platform, file, ok := strings.Cut(b, "="); ok && strings.HasPrefix(platform, "linux/") {
			spec.Platform, spec.Binary = platform, file
		}
		files, err := spec.Files()
		if err != nil {
			return err
		}
		if rootfs != "" {
			if err := WriteRootfs(rootfs, files); err != nil {
				return err
			}
		}
		img, err := spec.Image(files)
		if err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
		images = append(images, img)
	}
	if layoutDir == "" && archive == "" && push == "" {
		return nil
	}
	var out Artifact = images[0]
	if len(images) > 1 {
		idx, err := Index(images)
		if err != nil {
			return err
		}
		out = idx
	}
	digest, err := out.Digest()
	if err != nil {
		return err
	}
	if layoutDir != "" {
		if err := WriteLayout(layoutDir, out, spec.Name); err != nil {
			return err
		}
	}
	if archive != "" {
		if err := WriteArchive(archive, out, spec.Name); err != nil {
			return err
		}
	}
	if push != "" {
		ref, err := Push(push, out)
		if err != nil {
			return err
		}
		fmt.Println(ref)
		return nil
	}
	fmt.Printf("%s@%s\n", spec.Name, digest)
	return nil
}
