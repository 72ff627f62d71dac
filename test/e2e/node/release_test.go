package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestPublishedRelease_InstallsWithOneCommand is a release as a user meets
// it, without the internet: hack/release/publish.sh (what the release
// workflow runs) publishes two versions to an OCI registry in this process
// (image index for linux/amd64 and linux/arm64, chart, cosign signatures);
// the signatures verify with the release key and not with another; the
// older version installs with nothing but `helm install dsguard oci://...
// --version` (containerd pulls the image from the registry: it was never
// imported), passes `helm test`, and upgrades to the newer with
// --reset-then-reuse-values while DaemonSet requests keep coming and every
// one of them gets dsguard's answer.
func TestPublishedRelease_InstallsWithOneCommand(t *testing.T) {
	requireNode(t)
	reg := startRegistry(t)
	work := t.TempDir()
	cosign := cosignBinary(t)
	keyDir := filepath.Join(work, "key")
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	otherDir := filepath.Join(work, "other-key")
	if err := os.MkdirAll(otherDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{keyDir, otherDir} {
		framework.Must(t, framework.Logged(t, framework.Run(t.Context(), d, "", []string{"COSIGN_PASSWORD="}, cosign, "generate-key-pair")))
	}

	// The binaries the image index holds: the image's amd64 binary built
	// for this suite, and the same source cross-built for arm64.
	arm64 := filepath.Join(work, "linux-arm64", "dsguard")
	build := exec.CommandContext(t.Context(), "go", "build", "-tags", framework.ImageBuildTags, "-ldflags", "-s -w -X main.version=e2e",
		"-o", arm64, "./cmd/dsguard")
	build.Dir, build.Env = cluster.Root, append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cross-building dsguard for arm64: %v\n%s", err, out)
	}
	t.Logf("figures: cross-built dsguard for linux/arm64 in %s", time.Since(start).Round(time.Millisecond))

	// An SBOM to attest: a CycloneDX document naming the binary, as the
	// release attests GoReleaser's.
	sbom := filepath.Join(work, "dsguard.cdx.json")
	if err := os.WriteFile(sbom, []byte(`{"bomFormat":"CycloneDX","specVersion":"1.5","version":1,`+
		`"metadata":{"component":{"type":"application","name":"dsguard","version":"e2e"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	versions := []string{"0.1.0-e2e.1", "0.1.0-e2e.2"}
	published := map[string]publishedRelease{}
	for _, v := range versions {
		start := time.Now()
		published[v] = publish(t, reg, v, cosign, filepath.Join(keyDir, "cosign.key"), sbom,
			"linux/amd64="+dsguardBin, "linux/arm64="+arm64)
		t.Logf("figures: published %s (image index, chart, two signatures and an SBOM attestation, all verified) in %s", v, time.Since(start).Round(time.Millisecond))
	}

	t.Run("the image is one index for linux/amd64 and linux/arm64", func(t *testing.T) {
		ref, err := name.ParseReference(published[versions[1]].image)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("reading %s from the registry: %v", ref, err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var platforms []string
		for _, d := range m.Manifests {
			platforms = append(platforms, d.Platform.String())
		}
		if strings.Join(platforms, " ") != "linux/amd64 linux/arm64" {
			t.Errorf("the index holds %v, want linux/amd64 and linux/arm64", platforms)
		}
	})

	t.Run("the signatures verify with the release key and not with another", func(t *testing.T) {
		for _, ref := range []string{published[versions[0]].image, published[versions[0]].chart} {
			for _, k := range []struct {
				dir  string
				want bool
			}{{keyDir, true}, {otherDir, false}} {
				r := framework.Logged(t, framework.Run(t.Context(), work, "", nil, cosign, "verify", "--key", filepath.Join(k.dir, "cosign.pub"),
					"--insecure-ignore-tlog=true", "--allow-http-registry", ref))
				if (r.Err == nil) != k.want {
					t.Errorf("cosign verify %s with %s: exit %d, want success %v", ref, filepath.Base(k.dir), r.ExitCode, k.want)
				}
			}
		}
		r := framework.Logged(t, framework.Run(t.Context(), work, "", nil, cosign, "verify-attestation", "--type", "cyclonedx",
			"--key", filepath.Join(keyDir, "cosign.pub"), "--insecure-ignore-tlog=true", "--allow-http-registry", published[versions[0]].image))
		if r.Err != nil || !strings.Contains(r.Stdout, "payload") {
			t.Errorf("cosign verify-attestation of the SBOM: exit %d, want the attestation verified", r.ExitCode)
		}
	})

	// The suite's own release judges the same requests: it goes, so that
	// every answer below is the published release's.
	if r := cluster.Helm(t.Context(), "helm", "status", release, "-n", namespace); r.Err == nil {
		mustHelm(t, "helm", "uninstall", release, "-n", namespace, "--wait", "--timeout", "2m")
	}
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, 3*time.Minute)
		defer cancel()
		if r := cluster.Helm(ctx, "helm", "uninstall", release, "-n", namespace, "--wait", "--timeout", "2m"); r.Err != nil &&
			!strings.Contains(r.Stderr, "not found") {
			t.Errorf("helm uninstall of the published release: %s", r.Stderr)
		}
	})
	if r := cluster.Kubectl(t.Context(), "", "get", "namespace", "monitoring"); r.Err != nil {
		mustKubectl(t, "", "create", "namespace", "monitoring")
	}
	chart := "oci://" + reg + "/charts/dsguard"
	start = time.Now()
	// --plain-http: the registry of this test speaks HTTP; a registry
	// such as ghcr.io needs nothing but the command.
	mustHelm(t, "helm", "install", release, chart, "--version", versions[0], "--plain-http", "-n", namespace, "--create-namespace",
		"--wait", "--timeout", "4m")
	t.Logf("figures: helm install from %s (containerd pulling the image) took %s", chart, time.Since(start).Round(time.Millisecond))
	wantRunning(t, published[versions[0]].image)
	eventually(t, 60*time.Second, func() bool {
		r := cluster.Kubectl(t.Context(), example(t, "node-exporter.yaml"), "apply", "--dry-run=server", "-f", "-")
		return strings.Contains(r.Stderr, "control-plane-toleration")
	}, func() string { return "the API server does not call the published dsguard" })
	if out := mustHelm(t, "helm", "test", release, "-n", namespace, "--timeout", "4m"); !strings.Contains(out, "Succeeded") {
		t.Fatalf("helm test did not report success:\n%s", out)
	}

	loop := startReviewLoop(t)
	start = time.Now()
	mustHelm(t, "helm", "upgrade", release, chart, "--version", versions[1], "--plain-http", "-n", namespace,
		"--reset-then-reuse-values", "--wait", "--timeout", "4m")
	t.Logf("figures: helm upgrade %s -> %s took %s", versions[0], versions[1], time.Since(start).Round(time.Millisecond))
	wantRunning(t, published[versions[1]].image)
	// A few more rounds against the new replicas alone.
	time.Sleep(3 * time.Second)
	answered, failures := loop.stop()
	t.Logf("figures: %d DaemonSet reviews during and after the upgrade, %d not answered by dsguard", answered, len(failures))
	if answered < 20 {
		t.Errorf("only %d reviews ran during the upgrade: the loop proves nothing", answered)
	}
	for _, f := range failures {
		t.Errorf("a review failed during the upgrade: %s", f)
	}
}

// startRegistry serves an OCI registry (go-containerregistry's, in memory)
// on a loopback port for the test's life and returns its host as
// "localhost:PORT": containerd and helm (with --plain-http) speak HTTP to
// a localhost registry.
func startRegistry(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("registry: %v", err)
		}
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return fmt.Sprintf("localhost:%d", ln.Addr().(*net.TCPAddr).Port)
}

// cosignBinary returns cosign, built by hack/tools.sh at the version the
// release workflow uses.
func cosignBinary(t *testing.T) string {
	t.Helper()
	r := framework.Run(t.Context(), cluster.Root, "", nil, "hack/tools.sh", "--only", "helm", "--print-cosign")
	if r.Err != nil {
		t.Fatalf("hack/tools.sh --print-cosign: %s", r.Error())
	}
	return strings.TrimSpace(r.Stdout)
}

// publishedRelease names what publish.sh pushed, by digest.
type publishedRelease struct{ image, chart string }

// publish runs hack/release/publish.sh, the release workflow's own step,
// with its helm and cosign homes under the test's directory.
func publish(t *testing.T, reg, version, cosign, key, sbom string, binaries ...string) publishedRelease {
	t.Helper()
	home := t.TempDir()
	args := []string{"--registry", reg, "--version", version, "--key", key, "--sbom", sbom, "--plain-http"}
	for _, b := range binaries {
		args = append(args, "--binary", b)
	}
	env := []string{
		"PATH=" + cluster.Tools + ":" + filepath.Dir(cosign) + ":" + os.Getenv("PATH"),
		"COSIGN_PASSWORD=", "DOCKER_CONFIG=" + filepath.Join(home, "docker"),
		"HELM_CACHE_HOME=" + filepath.Join(home, "helm"), "HELM_CONFIG_HOME=" + filepath.Join(home, "helm"), "HELM_DATA_HOME=" + filepath.Join(home, "helm"),
	}
	out := framework.Must(t, framework.Logged(t, framework.Run(t.Context(), cluster.Root, "", env, "hack/release/publish.sh", args...)))
	var p publishedRelease
	for _, l := range splitLines(out) {
		if ref, ok := strings.CutPrefix(l, "image "); ok {
			p.image = ref
		}
		if ref, ok := strings.CutPrefix(l, "chart "); ok {
			p.chart = ref
		}
	}
	if !strings.HasPrefix(p.image, reg+"/dsguard@sha256:") || !strings.HasPrefix(p.chart, reg+"/charts/dsguard@sha256:") {
		t.Fatalf("publish.sh named no image and chart by digest:\n%s", out)
	}
	return p
}

// wantRunning waits until every dsguard Pod runs the image by that digest,
// pulled by containerd from the registry (the CRI lists it under its
// repository; nothing imported it).
func wantRunning(t *testing.T, image string) {
	t.Helper()
	eventually(t, 2*time.Minute, func() bool {
		r := cluster.Kubectl(t.Context(), "", "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/name=dsguard",
			"-o", `jsonpath={range .items[*]}{.spec.containers[0].image}{" "}{.status.containerStatuses[0].ready}{"\n"}{end}`)
		lines := splitLines(r.Stdout)
		if r.Err != nil || len(lines) != 2 {
			return false
		}
		for _, l := range lines {
			if l != image+" true" {
				return false
			}
		}
		return true
	}, func() string {
		return "dsguard's Pods do not run " + image + ":\n" + cluster.Kubectl(t.Context(), "", "get", "pods", "-n", namespace, "-o", "wide").Stdout
	})
	repo, _, _ := strings.Cut(image, "@")
	if r := cluster.Ctr(t.Context(), "images", "ls", "-q"); !strings.Contains(r.Stdout, repo) {
		t.Errorf("containerd holds no image of %s:\n%s", repo, r.Stdout)
	}
}

// reviewLoop sends DaemonSet writes that dsguard must deny, as server-side
// dry runs, until stopped; a request answered by anything but dsguard's
// denial (a webhook that cannot be reached, a timeout) is a failure.
type reviewLoop struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	answered atomic.Int64
	mu       sync.Mutex
	failures []string
}

func startReviewLoop(t *testing.T) *reviewLoop {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	l := &reviewLoop{cancel: cancel}
	manifest := example(t, "node-exporter.yaml")
	for w := range 2 {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				r := cluster.Kubectl(ctx, manifest, "apply", "--dry-run=server", "-f", "-")
				if ctx.Err() != nil {
					return
				}
				if strings.Contains(r.Stderr, "denied the request") && strings.Contains(r.Stderr, "control-plane-toleration") {
					l.answered.Add(1)
					continue
				}
				l.mu.Lock()
				l.failures = append(l.failures, fmt.Sprintf("worker %d at %s: exit %d: %s", w, time.Now().Format(time.StampMilli), r.ExitCode,
					strings.TrimSpace(r.Stderr+r.Stdout)))
				l.mu.Unlock()
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	return l
}

// stop ends the loop and returns how many reviews dsguard answered and
// what failed.
func (l *reviewLoop) stop() (int64, []string) {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answered.Load(), l.failures
}
