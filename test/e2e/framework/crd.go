package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitEstablished waits until the CustomResourceDefinition name is
// Established. `kubectl wait --for=condition=Established` right after the
// CRD is created fails at once ("status.conditions accessor error") while
// the API server has written no condition yet, instead of waiting.
func WaitEstablished(ctx context.Context, kubectl func(ctx context.Context, stdin string, args ...string) Result, name string, timeout time.Duration) error {
	var last Result
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = kubectl(ctx, "", "get", "crd", name, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		return last.Err == nil && strings.TrimSpace(last.Stdout) == "True", nil
	})
	if err != nil {
		return fmt.Errorf("CustomResourceDefinition %s not Established after %s: %s%s", name, timeout, last.Stdout, last.Stderr)
	}
	return nil
}
