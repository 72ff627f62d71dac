package framework

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KillAPIServer kills kube-apiserver with SIGKILL, as an OOM kill or a lost
// control-plane node would; etcd and everything else keep running, and
// clients see refused connections until StartAPIServer. (A graceful SIGTERM
// drains long-running requests and can take longer than a test should wait.)
func (c *Cluster) KillAPIServer() error {
	pid, err := childProcess("kube-apiserver")
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing kube-apiserver: %w", err)
	}
	// envtest notices the exit and forgets the process.
	if err := c.env.ControlPlane.GetAPIServer().Stop(); err != nil {
		return fmt.Errorf("after killing kube-apiserver: %w", err)
	}
	return nil
}

// StartAPIServer starts kube-apiserver again on the same address with the
// same certificates and users, and waits until it reports healthy. It
// returns how long that took.
func (c *Cluster) StartAPIServer() (time.Duration, error) {
	start := time.Now()
	if err := c.env.ControlPlane.GetAPIServer().Start(); err != nil {
		return 0, fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	return time.Since(start), nil
}

// childProcess returns the PID of this process's child running the command name.
func childProcess(name string) (int, error) {
	self := strconv.Itoa(os.Getpid())
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after ')'.
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if s[open+1:end] == name && len(fields) > 1 && fields[1] == self {
			return strconv.Atoi(strings.TrimSpace(s[:open]))
		}
	}
	return 0, errors.New("no " + name + " child process")
}
