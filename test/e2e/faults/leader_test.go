package faults

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// leaseName is the auditor's Lease in dsguard's namespace.
const leaseName = "dsguard-coverage"

// leaderOf returns the replica that holds the auditor's lease by its own
// account (client-go's leader_election_master_status gauge), or nil.
func leaderOf(replicas []*framework.Replica) *framework.Replica {
	for _, r := range replicas {
		if v, err := r.Metric("leader_election_master_status", `name="`+leaseName+`"`); err == nil && v == 1 {
			return r
		}
	}
	return nil
}

// auditEvents counts the Events the auditor emitted about DaemonSets in
// namespace, by object, reason and note: an Event repeated by the same
// recorder is one object with a series count, one repeated by another
// replica is a second object.
func auditEvents(t *testing.T, namespace string) map[string]int32 {
	t.Helper()
	list, err := kube.EventsV1().Events(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, e := range list.Items {
		if e.Regarding.Kind != "DaemonSet" || e.ReportingController != "dsguard" && e.DeprecatedSource.Component != "dsguard" && !strings.HasPrefix(e.ReportingController, "dsguard") {
			continue
		}
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		out[fmt.Sprintf("%s %s: %s", e.Regarding.Name, e.Reason, e.Note)] += n
	}
	return out
}

// TestLeaderCut_WebhookServesAndLeaseMoves cuts the leader's access to the
// API server for 30 seconds. Both replicas must keep answering reviews (the
// leader from its caches), the other replica must take the lease, the old
// leader must stay up, and the new leader must not repeat an audit Event.
func TestLeaderCut_WebhookServesAndLeaseMoves(t *testing.T) {
	replicas := cluster.Replicas().Members()
	var leader *framework.Replica
	waitFor(t, "a leader", 60*time.Second, func() (bool, string) {
		leader = leaderOf(replicas)
		return leader != nil, "no replica reports the lease"
	})
	follower := replicas[0]
	if follower == leader {
		follower = replicas[1]
	}

	// A DaemonSet with violations in kube-system (never denied there) gives
	// the auditor Events to emit; wait until they are out and settled.
	if _, err := kube.AppsV1().DaemonSets("kube-system").Create(t.Context(), example(t, "node-exporter.yaml", "kube-system"),
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AppsV1().DaemonSets("kube-system").Delete(context.Background(), "node-exporter", metav1.DeleteOptions{})
	})
	// Settled: the leader has audited everything queued (its audit queue is
	// empty and idle) and the Events it emitted are all out (two reads in a
	// row agree), so that an Event after the cut is a repeat, not a late one.
	var before map[string]int32
	settled := waitFor(t, "the leader's audit Events, its audit queue idle", 60*time.Second, func() (bool, string) {
		prev := before
		before = auditEvents(t, "kube-system")
		depth, err1 := leader.Metric("workqueue_depth", `name="dsguard_audit"`)
		busy, err2 := leader.Metric("workqueue_unfinished_work_seconds", `name="dsguard_audit"`)
		state := fmt.Sprintf("Events %v; %s's audit queue: depth %v (%v), unfinished work %vs (%v)",
			keys(before), leader.Name, depth, err1, busy, err2)
		return len(before) > 0 && maps.Equal(before, prev) && err1 == nil && err2 == nil && depth == 0 && busy == 0, state
	})
	t.Logf("figures: audit Events before the cut (settled in %s): %v", settled.Round(time.Millisecond), keys(before))

	l := startLoad(t.Context(), "reviews while the leader is cut off", 2, 20*time.Millisecond, nil,
		deniedByDsguard(example(t, "node-exporter.yaml", "default")))
	direct := newDirectReviewer(t, example(t, "node-exporter.yaml", "default"))
	leaderAnswers := startLoad(t.Context(), "reviews straight to the cut-off leader "+leader.Name, 1, 50*time.Millisecond, nil,
		func(ctx context.Context) error {
			v, err := direct.review(leader)
			if err == nil && !v.denied {
				err = fmt.Errorf("allowed, want denied: %v", v.warnings)
			}
			return err
		})

	leader.API.Cut()
	cutAt := time.Now()
	took := waitFor(t, follower.Name+" takes the lease", 40*time.Second, func() (bool, string) {
		v, err := follower.Metric("leader_election_master_status", `name="`+leaseName+`"`)
		return err == nil && v == 1, fmt.Sprint(v, err)
	})
	t.Logf("figures: %s took the lease %s after %s was cut off", follower.Name, took.Round(time.Millisecond), leader.Name)
	// The cut lasts its 30 seconds whenever the lease moved: the leader's
	// renewal deadline is well inside it.
	time.Sleep(time.Until(cutAt.Add(30 * time.Second)))
	leader.API.Restore()
	t.Logf("figures: %s cut off for %s", leader.Name, time.Since(cutAt).Round(time.Millisecond))
	// Not a settle: the old leader gets 5 seconds with its API access back,
	// under load, in which an Event it held back through the cut would
	// reach the API server (the check below must see it).
	time.Sleep(5 * time.Second)
	l.stop(t)
	leaderAnswers.stop(t)

	if leader.Exited() {
		t.Errorf("%s exited after losing the lease; it should only stop auditing", leader.Name)
	} else if !leader.Ready() {
		t.Errorf("%s is not ready 5s after its API access came back", leader.Name)
	}
	if now := leaderOf(replicas); now != follower {
		t.Errorf("the lease should stay with %s, leader now: %v", follower.Name, now)
	}
	after := auditEvents(t, "kube-system")
	t.Logf("figures: audit Events after the lease moved: %v", keys(after))
	for k, n := range after {
		if n > before[k] {
			t.Errorf("Event emitted again after the lease moved (%d times in all): %s", n, k)
		}
	}
}

func keys(m map[string]int32) []string {
	out := make([]string, 0, len(m))
	for k, n := range m {
		out = append(out, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(out)
	return out
}
