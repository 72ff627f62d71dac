package framework

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Chromium is Debian's browser, which `make e2e` installs
// (hack/debian-package.sh).
const Chromium = "/usr/bin/chromium"

// chromiumFlags start headless Chromium as root on a machine without a
// network: no sandbox (root), and nothing that phones home, whose refused
// connections would only slow it down.
var chromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1400,900",
}

// RenderPage opens the local file in headless Chromium, with the fragment
// after # when set, and returns the DOM as the page's scripts left it.
// With screenshot set it also saves a PNG of the page there.
func RenderPage(ctx context.Context, file, fragment, screenshot string) (string, error) {
	if _, err := os.Stat(Chromium); err != nil {
		return "", fmt.Errorf("no browser at %s (make e2e installs Debian's chromium: hack/debian-package.sh chromium chromium): %w", Chromium, err)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", err
	}
	page := (&url.URL{Scheme: "file", Path: abs, Fragment: fragment}).String()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	run := func(args ...string) (string, error) {
		profile, err := os.MkdirTemp("", "dsguard-chromium-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(profile)
		cmd := exec.CommandContext(ctx, Chromium, append(append(slices.Clone(chromiumFlags), "--user-data-dir="+profile), args...)...)
		// Chromium's helpers (zygote, renderer, GPU) join its process
		// group: they end with it, on a timeout too.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		killGroup := func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.Cancel = killGroup
		cmd.WaitDelay = 10 * time.Second
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		_ = killGroup()
		if err != nil {
			return "", fmt.Errorf("chromium %v: %w\n%s", args, err, stderr.String())
		}
		return string(out), nil
	}
	dom, err := run("--dump-dom", page)
	if err != nil || screenshot == "" {
		return dom, err
	}
	_, err = run("--screenshot="+screenshot, page)
	return dom, err
}
