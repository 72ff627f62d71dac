package webhook

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeChange_BoundedWork: a review past the bounds is answered
// unjudged with a warning before a DaemonSet is listed; a caller not known
// to be the API server gets the verdict with the DaemonSets counted, never
// named, and makes dsguard list no Pods; a kubelet's relabel of its own
// node is warned about and recorded, never refused.
func TestNodeChange_BoundedWork(t *testing.T) {
	cluster := nodeChangeFixture{
		dss:     []appsv1.DaemonSet{agent("cilium", tolerating()), agent("general-only", selecting("pool", "general"))},
		withPod: []string{"cilium", "general-only"},
	}
	var many []func(*corev1.Node)
	for i := range MaxNodeTaints + 1 {
		many = append(many, tainted(fmt.Sprintf("forged-%d", i), "", corev1.TaintEffectNoSchedule))
	}
	kubelet := func(r *admissionv1.AdmissionRequest) {
		r.UserInfo.Username, r.UserInfo.Groups = "system:node:infra-4", []string{"system:nodes", "system:authenticated"}
		r.SubResource = "status"
	}
	cases := []struct {
		name        string
		policy      string
		ctx         func(context.Context) context.Context
		after       *corev1.Node
		as          func(*admissionv1.AdmissionRequest)
		allowed     bool
		result      string
		warning     string // a part of the first warning
		message     string // a part of the denial
		listed      bool   // the DaemonSets were listed
		podsListed  bool
		names       bool // an answer names a DaemonSet
		annotations bool
	}{{
		name: "more taints than judged", ctx: fromAPIServer, after: workerNode(many...),
		allowed: true, result: "unjudged", warning: "the node carries 129 taints, more than the 128 dsguard judges",
	}, {
		name: "the API server's review names the DaemonSets", ctx: fromAPIServer,
		after:   workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoSchedule)),
		allowed: true, result: "warned", warning: "node-change: monitoring/cilium: taint dedicated=infra:NoSchedule", listed: true, podsListed: true, names: true,
	}, {
		name: "an unverified caller learns counts only", ctx: func(ctx context.Context) context.Context { return withCaller(ctx, caller{unverified: true}) },
		after:   workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoSchedule)),
		allowed: true, result: "unverified", warning: "node-change: 1 DaemonSet loses node infra-4 (names are given only to the API server", listed: true,
	}, {
		name: "no client authentication and the API server never seen at its addresses: nobody can be told apart, names given", ctx: func(ctx context.Context) context.Context { return ctx },
		after:   workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoSchedule)),
		allowed: true, result: "warned", warning: "node-change: monitoring/cilium: taint dedicated=infra:NoSchedule", listed: true, podsListed: true, names: true,
	}, {
		name: "a caller that failed client authentication learns nothing", ctx: func(ctx context.Context) context.Context { return withCaller(ctx, caller{clientAuth: true}) },
		after:   workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoSchedule)),
		allowed: true, result: "unauthenticated",
	}, {
		name: "an unverified caller's deny still denies, naming nobody", policy: denyNodeLosses,
		ctx:     func(ctx context.Context) context.Context { return withCaller(ctx, caller{unverified: true}) },
		after:   workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoSchedule)),
		allowed: false, result: "unverified", message: "takes 1 agent away that the dsguard policy says no node may lose (names are given", listed: true,
	}, {
		name: "a label nobody selects moves no placement: no Pods listed", ctx: fromAPIServer,
		after:   workerNode(labelled("team", "platform")),
		allowed: true, result: "allowed", listed: true,
	}, {
		name: "a kubelet's relabel through nodes/status is warned, never denied", policy: denyNodeLosses, ctx: fromAPIServer,
		after: workerNode(labelled("pool", "infra")), as: kubelet,
		allowed: true, result: "warned", warning: "node-change: monitoring/general-only", listed: true, podsListed: true, names: true, annotations: true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, m := newNodeChangeHandler(t, tc.policy, cluster)
			listDS, listPods := h.DaemonSets, h.PodsOnNode
			var listed, podsListed bool
			h.DaemonSets = func(ctx context.Context) ([]*appsv1.DaemonSet, error) { listed = true; return listDS(ctx) }
			h.PodsOnNode = func(ctx context.Context, node string) ([]metav1.PartialObjectMetadata, error) {
				podsListed = true
				return listPods(ctx, node)
			}
			req := nodeRequest(t, admissionv1.Update, workerNode(), tc.after)
			if tc.as != nil {
				tc.as(&req.AdmissionRequest)
			}
			resp := h.Handle(tc.ctx(t.Context()), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			text := strings.Join(resp.Warnings, "\n")
			if resp.Result != nil {
				text += "\n" + resp.Result.Message
			}
			if tc.warning != "" && (len(resp.Warnings) == 0 || !strings.Contains(resp.Warnings[0], tc.warning)) {
				t.Errorf("warnings %q, want the first to hold %q", resp.Warnings, tc.warning)
			}
			if tc.message != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, tc.message)) {
				t.Errorf("denial %+v, want it to hold %q", resp.Result, tc.message)
			}
			if named := strings.Contains(text, "monitoring/"); named != tc.names {
				t.Errorf("the answer names a DaemonSet: %v, want %v:\n%s", named, tc.names, text)
			}
			if listed != tc.listed || podsListed != tc.podsListed {
				t.Errorf("DaemonSets listed %v, Pods listed %v; want %v, %v", listed, podsListed, tc.listed, tc.podsListed)
			}
			if got := len(resp.AuditAnnotations) > 0; got != tc.annotations {
				t.Errorf("audit annotations %v, want some: %v", resp.AuditAnnotations, tc.annotations)
			}
			if got := testutil.ToFloat64(m.NodeChangeDecisions.WithLabelValues(tc.result)); got != 1 {
				t.Errorf("dsguard_node_change_decisions_total{result=%q} = %v, want 1", tc.result, got)
			}
		})
	}
}

// TestServer_LimitedPathJudgesOneAtATime: requests to a path registered
// with RegisterLimited are judged one at a time, whatever their size; the
// ones that find no turn are refused as busy (entry-busy), and meanwhile
// the other paths are served at once.
func TestServer_LimitedPathJudgesOneAtATime(t *testing.T) {
	pki := newTestPKI(t)
	var inside, most atomic.Int32
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inside.Add(1)
		defer inside.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(300 * time.Millisecond)
		fmt.Fprint(w, "judged")
	})
	m := NewMetrics(prometheus.NewRegistry())
	addr := startTestServer(t, pki, ServerOptions{Refusals: m.Refusals}, nil, func(s *Server) {
		s.RegisterLimited("/validate-node", slow, NodeLaneWidth)
	})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pki.pool}, MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	var busy atomic.Int32
	for range 12 {
		wg.Go(func() {
			// A timeout of 1s leaves each at most half a second for its turn.
			resp, err := client.Post("https://"+addr+"/validate-node?timeout=1s", "application/json", strings.NewReader(`{}`))
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				busy.Add(1)
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if body, err := post(t, addr, &tls.Config{RootCAs: pki.pool}); err != nil || body != "authenticated=false" {
		t.Errorf("another path under the flood: %q, %v", body, err)
	}
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Errorf("another path waited %s behind the limited one", took)
	}
	wg.Wait()
	if got := most.Load(); got != NodeLaneWidth {
		t.Errorf("%d requests of the limited path were judged at once, want %d", got, NodeLaneWidth)
	}
	if busy.Load() == 0 || testutil.ToFloat64(m.Refusals.WithLabelValues(RefusedEntryBusy, CallerUnknown)) != float64(busy.Load()) {
		t.Errorf("%d answered busy, refusals{reason=entry-busy} %v: want the same, more than 0",
			busy.Load(), testutil.ToFloat64(m.Refusals.WithLabelValues(RefusedEntryBusy, CallerUnknown)))
	}
}
