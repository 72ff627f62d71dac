package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
)

// laneWait bounds every wait on a lane in these tests: should the lane stop
// granting or dropping its waiters, a test fails after it, saying what it
// waited for, instead of hanging until go test's timeout.
const laneWait = 10 * time.Second

// laneContext is the context of one wait on a lane: it ends after laneWait.
func laneContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), laneWait)
	t.Cleanup(cancel)
	return ctx
}

// outcome returns the next outcome queueInLane reports, failing t when none
// comes within laneWait; want says which was expected.
func outcome(t *testing.T, got <-chan string, want string) string {
	t.Helper()
	select {
	case g := <-got:
		return g
	case <-time.After(laneWait):
		t.Fatalf("no waiter left the lane within %s (want %s): the lane neither granted nor dropped it", laneWait, want)
		return ""
	}
}

// queueInLane starts a request of p waiting in l and returns where its
// outcome arrives: its name once granted (the slot then freed at once), or
// its error.
func queueInLane(t *testing.T, l *heavyLane, p peer, name string, got chan<- string) {
	t.Helper()
	before := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.pushed }()
	ctx := laneContext(t)
	go func() {
		release, err := l.acquire(ctx, p)
		if err != nil {
			got <- name + ": " + err.Error()
			return
		}
		got <- name
		release()
	}()
	for deadline := time.Now().Add(5 * time.Second); ; {
		l.mu.Lock()
		n := l.pushed
		l.mu.Unlock()
		if n > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never queued", name)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHeavyLane_FairQueue: the API server's requests go first, the other
// sources take turns, whatever order they came in.
func TestHeavyLane_FairQueue(t *testing.T) {
	l := newHeavyLane(1)
	hold, err := l.acquire(laneContext(t), peer{key: "flood"})
	if err != nil {
		t.Fatalf("the free slot of an empty lane: %v", err)
	}
	got := make(chan string, 10)
	flood, other, api := peer{key: "flood"}, peer{key: "other"}, peer{key: "apiserver", trusted: true}
	for i := range 3 {
		queueInLane(t, l, flood, fmt.Sprint("flood-", i), got)
	}
	queueInLane(t, l, other, "other", got)
	queueInLane(t, l, api, "api-server", got)
	hold()
	want := []string{"api-server", "flood-0", "other", "flood-1", "flood-2"}
	for i, w := range want {
		if g := outcome(t, got, w); g != w {
			t.Fatalf("grant %d: %s, want %s (order %v)", i, g, w, want)
		}
	}
}

// TestHeavyLane_FullQueueEvictsTheFlood: at its bound the queue drops the
// oldest waiter of the source with the most waiters, not the newcomer; the
// API server's waiters make room only for the API server.
func TestHeavyLane_FullQueueEvictsTheFlood(t *testing.T) {
	l := newHeavyLane(1)
	l.maxWaiting = 3
	hold, err := l.acquire(laneContext(t), peer{key: "flood"})
	if err != nil {
		t.Fatalf("the free slot of an empty lane: %v", err)
	}
	got := make(chan string, 10)
	for i := range 3 {
		queueInLane(t, l, peer{key: "flood"}, fmt.Sprint("flood-", i), got)
	}
	queueInLane(t, l, peer{key: "apiserver", trusted: true}, "api-server", got)
	if g := outcome(t, got, "flood-0 evicted"); g != "flood-0: "+errLaneEvicted.Error() {
		t.Fatalf("at the bound: %q, want flood-0 evicted", g)
	}
	// The flood's next request pushes out its own oldest, not the API
	// server's.
	queueInLane(t, l, peer{key: "flood"}, "flood-3", got)
	if g := outcome(t, got, "flood-1 evicted"); g != "flood-1: "+errLaneEvicted.Error() {
		t.Fatalf("the flood's newcomer: %q, want flood-1 evicted", g)
	}
	hold()
	for _, w := range []string{"api-server", "flood-2", "flood-3"} {
		if g := outcome(t, got, w); g != w {
			t.Fatalf("grant: %s, want %s", g, w)
		}
	}

	// A queue full of the API server's requests refuses other callers.
	l.maxWaiting = 2
	hold, err = l.acquire(laneContext(t), peer{key: "apiserver", trusted: true})
	if err != nil {
		t.Fatalf("the free slot of an empty lane: %v", err)
	}
	queueInLane(t, l, peer{key: "apiserver", trusted: true}, "api-0", got)
	queueInLane(t, l, peer{key: "apiserver", trusted: true}, "api-1", got)
	if _, err := l.acquire(laneContext(t), peer{key: "pod"}); !errors.Is(err, errLaneFull) {
		t.Errorf("a Pod's request beside a queue full of the API server's: %v, want %v", err, errLaneFull)
	}
	hold()
	for _, w := range []string{"api-0", "api-1"} {
		if g := outcome(t, got, w); g != w {
			t.Fatalf("grant: %s, want %s", g, w)
		}
	}
}

func TestBodyBudget_Shares(t *testing.T) {
	api, pod, other := peer{key: "a", trusted: true}, peer{key: "p"}, peer{key: "o"}
	tests := []struct {
		name       string
		clientAuth bool
		takes      []peer
		n          int64
		want       []bool
	}{
		{"client auth: the API server has three quarters", true, []peer{api, api, api, api}, 25, []bool{true, true, true, false}},
		{"client auth: others share a quarter, half each", true, []peer{pod, pod, other, other, pod}, 6, []bool{true, true, true, true, false}},
		{"client auth: a Pod's flood leaves the API server's share", true, []peer{pod, pod, pod, api, api, api}, 12, []bool{true, false, false, true, true, true}},
		{"no client auth: one source holds half at most", false, []peer{pod, pod, pod, other, other, other}, 25, []bool{true, true, false, true, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBodyBudget(100, tt.clientAuth)
			for i, p := range tt.takes {
				if got := b.take(p, tt.n); got != tt.want[i] {
					t.Errorf("take %d by %+v: %v, want %v", i, p, got, tt.want[i])
				}
			}
		})
	}
	b := newBodyBudget(100, false)
	b.take(pod, 50)
	b.give(pod, 50)
	if !b.take(pod, 50) {
		t.Error("bytes given back were not available again")
	}
}

// TestServer_ClientCAReloaded: a new client CA in the file authenticates its
// certificates without a restart; the old CA's no longer do.
func TestServer_ClientCAReloaded(t *testing.T) {
	defer func(d time.Duration) { clientCAReloadInterval = d }(clientCAReloadInterval)
	clientCAReloadInterval = 20 * time.Millisecond
	pki, next := newTestPKI(t), newTestPKI(t)
	addr := startTestServer(t, pki, ServerOptions{ClientCAFile: pki.caFile}, nil)
	with := func(c tls.Certificate) string {
		got, err := post(t, addr, &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{c}})
		if err != nil {
			return "refused"
		}
		return got
	}
	if got := with(next.client); got != "refused" {
		t.Fatalf("a certificate of a CA not yet in the file: %q", got)
	}
	data, err := os.ReadFile(next.caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pki.caFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for with(next.client) != "authenticated=true" {
		if time.Now().After(deadline) {
			t.Fatal("the new client CA was not loaded within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := with(pki.client); got != "refused" {
		t.Errorf("a certificate of the replaced CA: %q, want refused at the handshake", got)
	}
}

// heavyPlacement gives ds a required affinity naming n hostnames, one term
// each: a prediction of it costs about n × n.
func heavyPlacement(n int) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		terms := make([]corev1.NodeSelectorTerm, n)
		for i := range terms {
			terms[i] = corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{fmt.Sprint("node-", i)}}}}
		}
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
}

// TestDaemonSetHandler_OldObjectWithinTheLane: an UPDATE whose new object is
// light but whose stored object is heavy waits for the heavy lane (the old
// object may be judged to ratchet a deny), and a refusal as busy counts as
// refused, not as an error.
func TestDaemonSetHandler_OldObjectWithinTheLane(t *testing.T) {
	h, _, m := newTestHandler(t, "")
	nodes := make([]*corev1.Node, 300)
	for i := range nodes {
		name := fmt.Sprint("node-", i)
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": name}}}
	}
	snap := coverage.NewNodeSnapshot(nodes)
	h.nodes = func() *coverage.NodeSnapshot { return snap }
	old, light := compliantDS(noTolerations, heavyPlacement(300)), compliantDS(noTolerations)
	env := policy.Env{Policy: h.source.Current().Policy, Nodes: snap}
	if w, o := env.PredictionWork(light), env.PredictionWork(old); w > HeavyWork || o <= HeavyWork {
		t.Fatalf("fixture: new object's work %d, old object's %d; want light and heavy", w, o)
	}
	lane := newHeavyLane(1)
	hold, err := lane.acquire(laneContext(t), peer{key: "flood"})
	if err != nil {
		t.Fatalf("the free slot of an empty lane: %v", err)
	}
	defer hold()
	ctx := context.WithValue(laneContext(t), laneKey{}, &laneUse{lane: lane, peer: peer{key: "x"}, deadline: time.Now().Add(50 * time.Millisecond)})
	start := time.Now()
	resp := h.Handle(ctx, request(t, admissionv1.Update, light, old))
	if waited := time.Since(start); waited > laneWait/2 {
		t.Fatalf("the review waited %s for the lane, past its own 50ms deadline", waited)
	}
	if resp.Allowed || resp.Result.Code != 503 {
		t.Fatalf("an UPDATE with a heavy old object and the lane full: want refused as busy, got allowed=%v %+v", resp.Allowed, resp.Result)
	}
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues("refused")); got != 1 {
		t.Errorf("decisions{result=refused} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues("error")); got != 0 {
		t.Errorf("a refusal as busy counted as an error (%v)", got)
	}
}

// TestDaemonSetHandler_AbandonedIsNotAnError: a review whose caller went
// away counts as abandoned, not as dsguard's error.
func TestDaemonSetHandler_AbandonedIsNotAnError(t *testing.T) {
	h, _, m := newTestHandler(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h.Handle(ctx, request(t, admissionv1.Create, compliantDS(noTolerations), nil))
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues("error")); got != 0 {
		t.Errorf("an abandoned review counted as an error (%v): it would fire DsguardWebhookErrors", got)
	}
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues("abandoned")); got != 1 {
		t.Errorf("decisions{result=abandoned} = %v, want 1", got)
	}
}
