package framework

import (
	"context"
	"testing"
	"time"
)

// CleanupContext returns a context for work done in a t.Cleanup, bounded by
// timeout. t.Context() is cancelled just before cleanups run, so a command
// started under it from a cleanup does not run at all, and the state it was
// meant to undo stays for the tests that follow.
func CleanupContext(t testing.TB, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(t.Context()), timeout)
}

// DeleteOnCleanup deletes what args name (kubectl delete's arguments, e.g.
// "daemonset", "-n", "monitoring", "node-exporter") when t ends, whether it
// passed or not, so that no later test meets it. Objects already gone are
// no error.
func (c *Cluster) DeleteOnCleanup(t testing.TB, args ...string) {
	t.Helper()
	deleteOnCleanup(t, c.Kubectl, args)
}

// DeleteOnCleanup is Cluster.DeleteOnCleanup on the real node's cluster.
func (n *NodeCluster) DeleteOnCleanup(t testing.TB, args ...string) {
	t.Helper()
	deleteOnCleanup(t, n.Kubectl, args)
}

// deleteOnCleanup runs kubectl delete from t.Cleanup with a context of its
// own: t.Context() is already cancelled there.
func deleteOnCleanup(t testing.TB, kubectl func(ctx context.Context, stdin string, args ...string) Result, args []string) {
	t.Cleanup(func() {
		ctx, cancel := CleanupContext(t, time.Minute)
		defer cancel()
		if r := kubectl(ctx, "", append([]string{"delete", "--ignore-not-found"}, args...)...); r.Err != nil {
			t.Errorf("cleanup: %v", r.Error())
		}
	})
}
