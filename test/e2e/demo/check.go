package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// runDsguardCheck runs the offline check on the examples, against the demo's
// node set, with the dsguard binary under test and returns its output and exit status.
func runDsguardCheck(ctx context.Context, c *framework.Cluster) (string, int) {
	cmd := exec.CommandContext(ctx, c.Dsguard, "check", "-f", "examples/", "--nodes", "examples/nodes.yaml")
	cmd.Dir = c.Root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		return out.String() + err.Error() + "\n", -1
	}
	return out.String(), 0
}
