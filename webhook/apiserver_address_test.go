package webhook

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// fromAddress is a TLS client whose connections leave from the loopback
// address local (Linux answers every 127.0.0.0/8 address), so one test can
// play the API server and the Pods beside it.
func fromAddress(pki testPKI, local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pki.pool}, DialContext: d.DialContext}}
}

// holdingClient connects from local, announces a body of LargeReviewBytes
// plus held bytes, sends all but its last byte at once and then stalls: the
// bytes past LargeReviewBytes sit in the body budget until the pace cuts
// it off.
func holdingClient(t *testing.T, addr string, pki testPKI, local string, held int) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pki.pool})
	if err != nil {
		t.Fatal(err)
	}
	size := LargeReviewBytes + held
	if _, err := fmt.Fprintf(conn, "POST /lane HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = conn.Write(bytes.Repeat([]byte(" "), size-1)) }()
	return conn
}

// TestServer_APIServerAddressesWithoutClientAuth: without client
// authentication, three Pods (127.0.0.3-5) hold large bodies that stall,
// as much of the budget as each may; the API server (127.0.0.2, its
// configured address) still gets its large review held, because its share
// is set aside for it; the Pods' refusals are counted as theirs. And once
// the API server was seen at its address, a review from elsewhere is
// marked Unverified, before that not.
func TestServer_APIServerAddressesWithoutClientAuth(t *testing.T) {
	for _, tc := range []struct {
		name      string
		addresses []netip.Prefix
		wantHeld  bool
	}{
		{"the API server's address configured", []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}, true},
		// The control: without the addresses the Pods can take it all.
		{"no addresses: the Pods crowd it out", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pki := newTestPKI(t)
			const mib = 1 << 20
			refusals := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "r"}, []string{"reason", "caller"})
			addr := startTestServer(t, pki, ServerOptions{ReadTimeout: 20 * time.Second, BodyGrace: 8 * time.Second,
				LargeBodyBudget: 8 * mib, Refusals: refusals, APIServerAddresses: tc.addresses}, nil)
			// One Pod after another, so that their bodies arrive in turn
			// (together, two could outgrow the share at once and both be
			// refused, leaving room).
			for _, pod := range []string{"127.0.0.3", "127.0.0.4", "127.0.0.5"} {
				c := holdingClient(t, addr, pki, pod, 4*mib-1)
				defer c.Close()
				time.Sleep(300 * time.Millisecond)
			}
			// The Pods' bytes arrive and are held: the budget is full once
			// one of them is refused (its kind's share, or its own, taken).
			for deadline := time.Now().Add(15 * time.Second); testutil.ToFloat64(refusals.WithLabelValues(RefusedBodyBudget, CallerUnknown)) < 1; {
				if time.Now().After(deadline) {
					t.Fatal("the Pods' stalled bodies never filled the budget")
				}
				time.Sleep(20 * time.Millisecond)
			}
			api := fromAddress(pki, "127.0.0.2")
			defer api.CloseIdleConnections()
			resp, err := api.Post("https://"+addr+"/lane", "application/json", bytes.NewReader(bytes.Repeat([]byte(" "), LargeReviewBytes+3*mib)))
			held := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				held = held && strings.TrimSpace(string(body)) == "held"
			}
			if held != tc.wantHeld {
				t.Errorf("the API server's 3 MiB review while three Pods hold large bodies: held %v (err %v), want %v", held, err, tc.wantHeld)
			}
			if len(tc.addresses) == 0 {
				return
			}
			if got := testutil.ToFloat64(refusals.WithLabelValues(RefusedBodyBudget, CallerUnknown)); got < 1 {
				t.Errorf("the Pods' body-budget refusals counted as unknown = %v, want at least 1", got)
			}
			if got := testutil.ToFloat64(refusals.WithLabelValues(RefusedBodyBudget, CallerAPIServerAddress)); got != 0 {
				t.Errorf("the API server's address refused %v times", got)
			}
		})
	}
}

// TestServer_UnverifiedOnceTheAPIServerWasSeen: a review from another
// source counts as before until one has come from the API server's
// address; then reviews from elsewhere are Unverified and the API server's
// never are.
func TestServer_UnverifiedOnceTheAPIServerWasSeen(t *testing.T) {
	pki := newTestPKI(t)
	addr := startTestServer(t, pki, ServerOptions{APIServerAddresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}, nil,
		func(s *Server) {
			s.Register("/who", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				fmt.Fprintf(w, "authenticated=%v unverified=%v", Authenticated(r.Context()), callerOf(r.Context(), false).unverified)
			}))
		})
	who := func(local string) string {
		t.Helper()
		c := fromAddress(pki, local)
		defer c.CloseIdleConnections()
		resp, err := c.Post("https://"+addr+"/who", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for i, step := range []struct{ from, want string }{
		{"127.0.0.3", "authenticated=false unverified=false"}, // the API server not seen yet
		{"127.0.0.2", "authenticated=false unverified=false"}, // an address is no authentication
		{"127.0.0.3", "authenticated=false unverified=true"},
		{"127.0.0.2", "authenticated=false unverified=false"},
	} {
		if got := who(step.from); got != step.want {
			t.Errorf("step %d, from %s: %q, want %q", i, step.from, got, step.want)
		}
	}
}

// TestDaemonSetHandler_UnverifiedReviewsAreCountedApart: without client
// authentication, a review marked Unverified (from outside the API
// server's addresses) is judged and answered as any other, but moves only
// decisions{result="unverified"}: neither the findings nor the bypass
// series, nor its answer's result, which the alerts read.
func TestDaemonSetHandler_UnverifiedReviewsAreCountedApart(t *testing.T) {
	h, _, m := newTestHandler(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nbypass:\n  users: [system:admin]\n")
	unverified := withCaller(t.Context(), caller{unverified: true})
	if resp := h.Handle(unverified, request(t, admissionv1.Create, compliantDS(noTolerations), nil)); resp.Allowed {
		t.Error("an unverified review of a DaemonSet a deny rule forbids was admitted: it must be judged as any other")
	}
	bypass := request(t, admissionv1.Create, compliantDS(noTolerations), nil)
	bypass.UserInfo.Username = "system:admin"
	h.Handle(unverified, bypass)
	for _, c := range []struct {
		series string
		got    float64
		want   float64
	}{
		{`decisions{result="unverified"}`, testutil.ToFloat64(m.Decisions.WithLabelValues("unverified")), 2},
		{`decisions{result="denied"}`, testutil.ToFloat64(m.Decisions.WithLabelValues("denied")), 0},
		{`findings{rule="control-plane-toleration"}`, testutil.ToFloat64(m.Findings.WithLabelValues("control-plane-toleration", "deny")), 0},
		{"bypass_total", testutil.ToFloat64(m.Bypasses), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.series, c.got, c.want)
		}
	}
	h.Handle(t.Context(), request(t, admissionv1.Create, compliantDS(noTolerations), nil))
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues("denied")); got != 1 {
		t.Errorf("a review not marked: decisions{result=\"denied\"} = %v, want 1", got)
	}
}

// TestNodeChange_UnverifiedIsJudgedButCountedApart: a node change from
// outside the API server's addresses is still judged (a deny stays a deny:
// an address is no identity), and counts as unverified, moving no findings.
func TestNodeChange_UnverifiedIsJudgedButCountedApart(t *testing.T) {
	cluster := nodeChangeFixture{dss: []appsv1.DaemonSet{agent("cilium", tolerating())}, withPod: []string{"cilium"}}
	h, m := newNodeChangeHandler(t, denyNodeLosses, cluster)
	unverified := withCaller(t.Context(), caller{unverified: true})
	resp := h.Handle(unverified, nodeRequest(t, admissionv1.Update, workerNode(), workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoSchedule))))
	if resp.Allowed {
		t.Error("an unverified node change that takes a critical agent away was allowed")
	}
	if got := testutil.ToFloat64(m.NodeChangeDecisions.WithLabelValues("unverified")); got != 1 {
		t.Errorf(`node_change_decisions{result="unverified"} = %v, want 1`, got)
	}
	if got := testutil.ToFloat64(m.NodeChangeDecisions.WithLabelValues("denied")); got != 0 {
		t.Errorf(`node_change_decisions{result="denied"} = %v, want 0`, got)
	}
	if got := testutil.CollectAndCount(m.Findings); got != 0 {
		t.Errorf("findings series moved by an unverified review: %d", got)
	}
}

// TestServer_OnlyTheAPIServerMovesRequestMetrics: controller-runtime's
// per-webhook series (requests by code, latency) count the requests of the
// API server, told apart by its certificate or, without client
// authentication, by its address once seen there; a caller that is not is
// answered all the same, uncounted.
func TestServer_OnlyTheAPIServerMovesRequestMetrics(t *testing.T) {
	pki := newTestPKI(t)
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		fmt.Fprint(w, "answered")
	})
	certClient := func(cert *tls.Certificate) *http.Client {
		cfg := &tls.Config{RootCAs: pki.pool}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	tests := []struct {
		name    string
		opts    ServerOptions
		path    string
		callers []*http.Client
		want    float64 // requests counted of len(callers)
	}{
		{"client auth: the API server's certificate, none, another identity's", ServerOptions{ClientCAFile: pki.caFile},
			"/counted-by-certificate", []*http.Client{certClient(&pki.client), certClient(nil), certClient(&pki.impostor), certClient(&pki.client)}, 2},
		{"by address: before the API server is seen, from it, from elsewhere",
			ServerOptions{APIServerAddresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}},
			"/counted-by-address", []*http.Client{fromAddress(pki, "127.0.0.3"), fromAddress(pki, "127.0.0.2"), fromAddress(pki, "127.0.0.3"), fromAddress(pki, "127.0.0.2")}, 3},
		{"no way to tell: every request counts", ServerOptions{},
			"/counted-always", []*http.Client{fromAddress(pki, "127.0.0.3"), fromAddress(pki, "127.0.0.2")}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := startTestServer(t, pki, tt.opts, nil, func(s *Server) { s.Register(tt.path, echo) })
			for i, c := range tt.callers {
				resp, err := c.Post("https://"+addr+tt.path, "application/json", strings.NewReader(`{}`))
				if err != nil {
					t.Fatalf("caller %d: %v", i, err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				c.CloseIdleConnections()
				if string(b) != "answered" {
					t.Errorf("caller %d: %q, want it answered", i, b)
				}
			}
			if got := crRequests(t, tt.path); got != tt.want {
				t.Errorf("controller_runtime_webhook_requests_total{webhook=%q} = %v, want %v of %d", tt.path, got, tt.want, len(tt.callers))
			}
			if got := crLatencyCount(t, tt.path); got != tt.want {
				t.Errorf("controller_runtime_webhook_latency_seconds_count{webhook=%q} = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
}

// crRequests and crLatencyCount read controller-runtime's per-webhook
// series for path from its registry.
func crRequests(t *testing.T, path string) float64 {
	return crSum(t, "controller_runtime_webhook_requests_total", path)
}

func crLatencyCount(t *testing.T, path string) float64 {
	return crSum(t, "controller_runtime_webhook_latency_seconds", path)
}

func crSum(t *testing.T, name, path string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && l.GetValue() == path {
					total += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return total
}
