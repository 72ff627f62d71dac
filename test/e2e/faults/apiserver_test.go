package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const controlPlaneTaint = "node-role.kubernetes.io/control-plane:NoSchedule"

// TestAPIServerRestart_VerdictsRecover kills and restarts kube-apiserver under a steady
// loop of DaemonSet applies. dsguard's own path to the API server is cut from
// the moment the API server stops until a little after it is back, and
// meanwhile the control-plane node loses its taint: a node change dsguard
// could not see. Once dsguard reaches the API server again, every replica
// must judge by the new node set within what its node view's retry backoff
// allows after an outage that long (see recoveryBound), and no apply may fail
// except while the API server itself was down.
func TestAPIServerRestart_VerdictsRecover(t *testing.T) {
	replicas := cluster.Replicas().Members()
	nodeExporter := example(t, "node-exporter.yaml", "default")
	direct := newDirectReviewer(t, nodeExporter)
	for _, r := range replicas {
		if v, err := direct.review(r); err != nil || !v.denied {
			t.Fatalf("%s before the restart: %+v %v, want node-exporter denied", r.Name, v, err)
		}
	}

	var apiDown atomic.Bool
	steady := example(t, "node-exporter-tolerations.yaml", "default")
	steady.Name = "steady"
	steady.APIVersion, steady.Kind = "apps/v1", "DaemonSet"
	var seq atomic.Int64
	applies := startLoad(t.Context(), "DaemonSet applies", 1, 50*time.Millisecond, apiDown.Load, func(ctx context.Context) error {
		ds := steady.DeepCopy()
		ds.Annotations = map[string]string{"faults.dsguard.io/seq": fmt.Sprint(seq.Add(1))}
		body, err := json.Marshal(ds)
		if err != nil {
			return err
		}
		force := true
		_, err = kube.AppsV1().DaemonSets("default").Patch(ctx, "steady", types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "faults-e2e", Force: &force})
		return err
	})
	t.Cleanup(func() {
		_ = kube.AppsV1().DaemonSets("default").Delete(context.Background(), "steady", metav1.DeleteOptions{})
	})
	// The applies run a while before the outage, to show they pass then.
	time.Sleep(2 * time.Second)

	cutAt := time.Now()
	apiDown.Store(true)
	if err := cluster.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	// dsguard's reconnection attempts go nowhere until Restore below.
	for _, r := range replicas {
		r.API.Cut()
	}
	// The outage itself: the API server stays down this long.
	time.Sleep(3 * time.Second)
	startup, err := cluster.StartAPIServer()
	apiDown.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("figures: kube-apiserver down %s (restart took %s)", time.Since(cutAt).Round(time.Millisecond), startup.Round(time.Millisecond))

	// The node change dsguard cannot see yet.
	if r := cluster.Kubectl(t.Context(), "", "taint", "nodes", "cp-1", controlPlaneTaint+"-"); r.Err != nil {
		t.Fatal(r.Error())
	}
	t.Cleanup(func() { retaint(t, direct) })
	// dsguard stays cut off a while after the node change, as after a
	// partition longer than the API server's restart.
	time.Sleep(2 * time.Second)
	for _, r := range replicas {
		r.API.Restore()
	}
	cut := time.Since(cutAt)
	bound := recoveryBound(cut)
	t.Logf("figures: dsguard cut off from the API server for %s; recovery bound %s", cut.Round(time.Millisecond), bound.Round(time.Millisecond))

	for _, r := range replicas {
		took := waitFor(t, r.Name+" judges by the untainted control-plane node", bound, func() (bool, string) {
			v, err := direct.review(r)
			if err != nil {
				return false, err.Error()
			}
			return !v.denied && hasWarning(v, "control-plane-toleration:"), fmt.Sprintf("%+v", v)
		})
		t.Logf("figures: %s: verdicts right again %s after its API access came back", r.Name, took.Round(time.Millisecond))
		if r.Exited() {
			t.Errorf("%s exited during the outage", r.Name)
		}
	}
	// Through the API server too.
	v, err := review(t.Context(), nodeExporter)
	if err != nil || v.denied {
		t.Errorf("through the API server: %+v %v, want allowed with a warning", v, err)
	}
	// The applies go on a second after recovery, to show they pass again.
	time.Sleep(time.Second)
	applies.stop(t)
}

// recoveryBound is how long after an outage of length cut a replica may take
// to judge by the nodes again. Its node view retries a failed list or watch
// with client-go's reflector backoff (clusterview's nodeBackoff): from 0.8 s,
// doubling per failure, each delay stretched by up to twice its length
// (jitter 1), the base capped at 30 s. Failures cannot come faster than the
// delays between them, so after cut the base is at most cut+0.8 s, and the
// delay pending when access returns at most twice that (60 s at most); then
// a relist, a few seconds on a loaded machine. (A fixed 10 s bound failed
// whenever the outage, slowed by a slow API server start, had pushed the
// pending delay past it.)
func recoveryBound(cut time.Duration) time.Duration {
	const first, limit = 800 * time.Millisecond, 30 * time.Second
	return 2*min(cut+first, limit) + 5*time.Second
}

func hasWarning(v verdict, prefix string) bool {
	for _, w := range v.warnings {
		if strings.HasPrefix(w, prefix) {
			return true
		}
	}
	return false
}

// retaint puts the control-plane taint back and waits until every replica
// denies node-exporter again, so later tests start from the usual cluster.
func retaint(t *testing.T, direct *directReviewer) {
	if r := cluster.Kubectl(context.Background(), "", "taint", "nodes", "cp-1", controlPlaneTaint, "--overwrite"); r.Err != nil {
		t.Error(r.Error())
		return
	}
	for _, r := range cluster.Replicas().Members() {
		waitFor(t, r.Name+" sees the taint again", 30*time.Second, func() (bool, string) {
			v, err := direct.review(r)
			return err == nil && v.denied, fmt.Sprintf("%+v %v", v, err)
		})
	}
}
