package framework

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// WaitEstablished waits until the CustomResourceDefinition name is
// Established. `kubectl wait --for=condition=Established` right after the
// CRD is created fails at once ("status.conditions accessor error") while
// the API server has written no condition yet, instead of waiting.
func WaitEstablished(ctx context.Context, kubectl func(ctx context.Context, stdin string, args ...string) Result, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last Result
	for {
		last = kubectl(ctx, "", "get", "crd", name, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		if last.Err == nil && strings.TrimSpace(last.Stdout) == "True" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CustomResourceDefinition %s not Established after %s: %s%s", name, timeout, last.Stdout, last.Stderr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
