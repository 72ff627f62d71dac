package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Process is a program a test starts beside the cluster: another dsguard
// (another replica, certificate mode or identity), or cert-manager.
type Process struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	err     error // from Wait, valid once exited is closed
	killed  bool
}

// StartDsguard starts the dsguard binary under test with args, logging to a
// file in dir. It dies with the test process; Stop ends it gracefully.
func (c *Cluster) StartDsguard(dir string, args ...string) (*Process, error) {
	return StartProcess(dir, c.Dsguard, args...)
}

// StartDsguardFor starts the dsguard under test for t (named who in its
// failure log), stops it when t ends, showing its log if t failed, and
// returns once it is ready on healthPort, with how long readiness took.
func (c *Cluster) StartDsguardFor(t testing.TB, who string, healthPort int, args ...string) (*Process, time.Duration) {
	t.Helper()
	p, err := c.StartDsguard(t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("dsguard (%s) log:\n%s", who, p.Log())
		}
	})
	start := time.Now()
	if err := p.WaitReady(t.Context(), healthPort, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	return p, time.Since(start)
}

// StartProcess starts bin with args, logging to a file in dir named after
// it. It dies with the test process; Stop ends it gracefully.
func StartProcess(dir, bin string, args ...string) (*Process, error) {
	p := &Process{logPath: filepath.Join(dir, fmt.Sprintf("%s-%d.log", filepath.Base(bin), time.Now().UnixNano()))}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p.exited = make(chan struct{})
	go func() { p.err = p.cmd.Wait(); logFile.Close(); close(p.exited) }()
	return p, nil
}

// Log returns what the process has logged so far.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// Stop sends SIGTERM and waits up to 15s, then kills.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.killed = true
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// ExitError says how a stopped process ended: nil for exit status 0 after
// SIGTERM within 15s, an error otherwise (or while it still runs).
func (p *Process) ExitError() error {
	select {
	case <-p.exited:
	default:
		return errors.New("still running")
	}
	switch {
	case p.killed:
		return errors.New("did not stop within 15s of SIGTERM")
	case p.err != nil:
		return fmt.Errorf("exited with %v", p.err)
	}
	return nil
}

// WaitReady polls http://127.0.0.1:healthPort/readyz until it answers 200.
func (p *Process) WaitReady(ctx context.Context, healthPort int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("dsguard exited:\n%s", p.Log())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return errors.New("dsguard not ready in time:\n" + p.Log())
}

// FreePort returns a TCP port free on 127.0.0.1 right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// terminate sends cmd SIGTERM and waits up to 15s for it to end, then kills
// it. exited is the buffered channel that receives cmd.Wait's result;
// terminate puts the result back for whoever reads it next.
func terminate(cmd *exec.Cmd, exited chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		err = <-exited
	}
	exited <- err
}
