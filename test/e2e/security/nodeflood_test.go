package security

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestNodeReviewFlood_DaemonSetWritesStayJudged runs a dsguard as the
// chart's default install does (no client authentication, the API server's
// address known) for the DaemonSets of one namespace, failurePolicy Fail,
// with a small connection cap. Three Pods, playing from 127.0.0.3-5, send
// forged Node reviews of about 200 KiB (4,000 taints) straight to its port
// on 60 connections. Meanwhile the API server's DaemonSet creates there
// must all be admitted within the entry's timeout, and no forged reply may
// name a DaemonSet (before the bounds, each named the agent in kube-flannel
// that every forged taint takes the node from).
func TestNodeReviewFlood_DaemonSetWritesStayJudged(t *testing.T) {
	const ns, vwc = "node-flood", "dsguard-node-flood"
	port, health := freePort(t), freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if r := kubectl(t, "", "create", "namespace", ns); r.ExitCode != 0 {
		t.Fatal(r.Error())
	}
	noAuthDsguard{name: vwc, namespace: ns, failurePolicy: "Fail", timeout: 5, port: port, health: health,
		flags: []string{"--max-connections=32", "--metrics-bind-address=0"}}.start(t)
	// Until the API server's caBundle holds this dsguard's CA its calls
	// fail (and the entry refuses): wait until a create is admitted.
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		return kubectl(t, toYAML(t, compliant(t, "flood-probe", ns)), "create", "--dry-run=server", "-f", "-").ExitCode == 0
	}, func() string { return "the API server's review admitted by the dsguard under test" })

	// An agent without tolerations: every forged taint takes the node
	// from it, so a reply that judged the review would name it.
	victim := example(t, "node-exporter.yaml", "flood-victim", "kube-flannel")
	if r := kubectl(t, toYAML(t, victim), "create", "-f", "-"); r.ExitCode != 0 {
		t.Fatal(r.Error())
	}
	t.Cleanup(func() {
		kubectl(t, "", "delete", "daemonset", "-n", "kube-flannel", "flood-victim", "--ignore-not-found")
	})
	forged := forgedNodeReview(t, 4000)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var sent atomic.Int64
	var named atomic.Value
	for _, pod := range []string{"127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		for range 20 {
			wg.Go(func() {
				c := fromSource(t, pod)
				defer c.CloseIdleConnections()
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/validate-node?timeout=2s", bytes.NewReader(forged))
					req.Header.Set("Content-Type", "application/json")
					resp, err := c.Do(req)
					if err != nil {
						continue
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					sent.Add(1)
					if strings.Contains(string(body), "kube-flannel/") || strings.Contains(string(body), ns+"/") {
						named.Store(string(body))
					}
				}
			})
		}
	}
	time.Sleep(2 * time.Second)
	const creates = 8
	var slowest time.Duration
	for i := range creates {
		start := time.Now()
		r := kubectl(t, toYAML(t, compliant(t, fmt.Sprintf("flood-%d", i), ns)), "create", "-f", "-")
		took := time.Since(start)
		slowest = max(slowest, took)
		if r.ExitCode != 0 {
			t.Errorf("create %d under the flood refused after %s: %s", i, took, r.Stderr)
		}
	}
	cancel()
	wg.Wait()
	if slowest > 5*time.Second {
		t.Errorf("the slowest create under the flood took %s, over the entry's 5 s timeout", slowest)
	}
	if v := named.Load(); v != nil {
		t.Errorf("a forged Node review's reply names a DaemonSet: %s", v)
	}
	if sent.Load() == 0 {
		t.Error("no forged Node review was answered")
	}
	t.Logf("flood: %d forged Node reviews answered; slowest of %d creates %s", sent.Load(), creates, slowest)
}

// forgedNodeReview is a Node review a Pod could send: worker-1 gaining
// taints NoSchedule taints, which an agent without tolerations loses it to.
func forgedNodeReview(t *testing.T, taints int) []byte {
	t.Helper()
	node, err := kube.CoreV1().Nodes().Get(t.Context(), "worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(node)
	for i := range taints {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: fmt.Sprintf("example.com/forged-%05d", i), Effect: corev1.TaintEffectNoSchedule})
	}
	after, _ := json.Marshal(node)
	data, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "forged", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: node.Name, Operation: admissionv1.Update,
			Object: runtime.RawExtension{Raw: after}, OldObject: runtime.RawExtension{Raw: before}}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}
