package framework

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// Logged logs a command's line and output to t (so a failing test shows its
// kubectl or Helm transcript) and returns r.
func Logged(t testing.TB, r Result) Result {
	t.Helper()
	t.Logf("$ %s\n%s%s", r.Command, r.Stdout, r.Stderr)
	return r
}

// Must fails t when the command failed and returns its stdout.
func Must(t testing.TB, r Result) string {
	t.Helper()
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	return r.Stdout
}

// Eventually calls check every interval until it returns true and returns the
// time it took; it fails t with last() when timeout passes first, and stops
// when t's context ends.
func Eventually(t testing.TB, timeout, interval time.Duration, check func() bool, last func() string) time.Duration {
	t.Helper()
	start := time.Now()
	for !check() {
		if time.Since(start) > timeout {
			t.Fatalf("not within %s: %s", timeout, last())
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(interval):
		}
	}
	return time.Since(start)
}

// ExampleDaemonSet reads the DaemonSet of examples/<name> in the repository
// at root, failing t when it is missing or not a DaemonSet.
func ExampleDaemonSet(t testing.TB, root, name string) *appsv1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(data, &ds); err != nil {
		t.Fatalf("examples/%s: %v", name, err)
	}
	return &ds
}

// ExpectAdmission fails the test unless r, a kubectl write, was admitted (or
// refused) as wanted and its output (warnings, refusal) says every string
// of says.
func ExpectAdmission(t testing.TB, what string, r Result, admitted bool, says ...string) {
	t.Helper()
	if (r.ExitCode == 0) != admitted {
		t.Fatalf("%s: admitted = %v, want %v:\n%s", what, r.ExitCode == 0, admitted, r.Stderr)
	}
	for _, s := range says {
		if !strings.Contains(r.Stderr, s) {
			t.Errorf("%s: kubectl's output lacks %q:\n%s", what, s, r.Stderr)
		}
	}
}

// nextHostPort hands out host ports to the tests' DaemonSets.
var nextHostPort atomic.Int32

// OwnHostPort moves every port ds holds on the node (host ports, and
// container ports under hostNetwork, with the readiness probe that checks
// them) to a port no other DaemonSet of the test process was given: tests
// that keep several copies of an example at once are about something else
// than host-port-conflict, which would refuse them.
func OwnHostPort(ds *appsv1.DaemonSet) {
	port := 20000 + nextHostPort.Add(1)
	spec := &ds.Spec.Template.Spec
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			c := &list[i]
			for j := range c.Ports {
				p := &c.Ports[j]
				if p.HostPort == 0 && !spec.HostNetwork {
					continue
				}
				old := p.ContainerPort
				p.ContainerPort = port
				if p.HostPort != 0 {
					p.HostPort = port
				}
				if pr := c.ReadinessProbe; pr != nil && pr.HTTPGet != nil && pr.HTTPGet.Port.IntValue() == int(old) {
					pr.HTTPGet.Port = intstr.FromInt32(port)
				}
			}
		}
	}
}
