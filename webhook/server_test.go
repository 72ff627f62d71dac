package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// testPKI is a CA with a serving and a client certificate signed by it.
type testPKI struct {
	pool   *x509.CertPool
	server tls.Certificate
	client tls.Certificate
	// impostor is signed by the same CA with another identity, as every
	// admin's and kubelet's certificate is in a kubeadm cluster.
	impostor tls.Certificate
	caFile   string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage, cn string) tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p := testPKI{pool: x509.NewCertPool(), server: leaf(2, x509.ExtKeyUsageServerAuth, "leaf"),
		client:   leaf(3, x509.ExtKeyUsageClientAuth, "kube-apiserver-webhook-client"),
		impostor: leaf(4, x509.ExtKeyUsageClientAuth, "kubernetes-admin")}
	p.pool.AddCert(ca)
	p.caFile = filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startTestServer starts a Server on a free local port with a handler at
// /echo that says whether the caller was authenticated.
// startTestServer starts a Server with the /echo and /lane routes, and
// whatever register adds, and returns its address.
func startTestServer(t *testing.T, pki testPKI, opts ServerOptions, onEvict func(), register ...func(*Server)) string {
	t.Helper()
	opts.Host, opts.Port = "127.0.0.1", 0
	opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pki.server, nil }
	})
	srv := NewServer(opts, onEvict)
	srv.Register("/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		fmt.Fprintf(w, "authenticated=%v", Authenticated(r.Context()))
	}))
	srv.Register("/lane", http.HandlerFunc(laneReporter))
	for _, r := range register {
		r(srv)
	}
	ctx := t.Context()
	errc := make(chan error, 1)
	go func() { errc <- srv.Start(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Addr() == "" {
		select {
		case err := <-errc:
			t.Fatalf("server stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.StartedChecker()(nil); err != nil {
		t.Fatalf("started checker: %v", err)
	}
	return srv.Addr()
}

func post(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer client.CloseIdleConnections()
	resp, err := client.Post("https://"+addr+"/echo", "application/json", bytes.NewReader([]byte(`{}`)))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func TestServer_ClientAuthentication(t *testing.T) {
	pki := newTestPKI(t)
	const impostor = 2
	tests := []struct {
		name       string
		opts       ServerOptions
		clientCert any    // true: the API server's; impostor; false: none
		want       string // body, or "" for a refused handshake
	}{
		{"no client CA configured", ServerOptions{}, true, "authenticated=false"},
		{"client CA, certificate given", ServerOptions{ClientCAFile: pki.caFile}, true, "authenticated=true"},
		{"client CA, no certificate: answered, unauthenticated", ServerOptions{ClientCAFile: pki.caFile}, false, "authenticated=false"},
		{"client certificate required, none given", ServerOptions{ClientCAFile: pki.caFile, RequireClientCert: true}, false, ""},
		{"client certificate required and given", ServerOptions{ClientCAFile: pki.caFile, RequireClientCert: true}, true, "authenticated=true"},
		{"client CA, a certificate from it with another identity: unauthenticated", ServerOptions{ClientCAFile: pki.caFile}, impostor, "authenticated=false"},
		{"client certificate required, another identity given", ServerOptions{ClientCAFile: pki.caFile, RequireClientCert: true}, impostor, ""},
		{"identities configured: the impostor's name authenticates", ServerOptions{ClientCAFile: pki.caFile, ClientIdentities: []string{"kubernetes-admin"}}, impostor, "authenticated=true"},
		{"identities configured: the default name no longer does", ServerOptions{ClientCAFile: pki.caFile, ClientIdentities: []string{"kubernetes-admin"}}, true, "authenticated=false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := startTestServer(t, pki, tt.opts, nil)
			cfg := &tls.Config{RootCAs: pki.pool}
			switch tt.clientCert {
			case true:
				cfg.Certificates = []tls.Certificate{pki.client}
			case impostor:
				cfg.Certificates = []tls.Certificate{pki.impostor}
			}
			got, err := post(t, addr, cfg)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("want the request refused, got %q", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestServer_RequireClientCertWithoutCA(t *testing.T) {
	srv := NewServer(ServerOptions{RequireClientCert: true, Host: "127.0.0.1"}, nil)
	if err := srv.Start(t.Context()); err == nil {
		t.Fatal("want an error: requiring client certificates needs a CA bundle")
	}
}

func TestServer_OnlyAEADCiphersOverTLS12(t *testing.T) {
	pki := newTestPKI(t)
	addr := startTestServer(t, pki, ServerOptions{}, nil)
	for _, suite := range tls.CipherSuites() {
		cfg := &tls.Config{RootCAs: pki.pool, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite.ID}}
		conn, err := tls.Dial("tcp", addr, cfg)
		accepted := err == nil
		if conn != nil {
			conn.Close()
		}
		aead := false
		for _, id := range AEADCipherSuites {
			aead = aead || id == suite.ID
		}
		// The test certificate is ECDSA: RSA suites cannot be agreed on.
		if accepted != aead && (accepted || isECDSASuite(suite)) {
			t.Errorf("%s: accepted=%v, want %v", suite.Name, accepted, aead)
		}
	}
	for _, suite := range tls.InsecureCipherSuites() {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite.ID}})
		if err == nil {
			conn.Close()
			t.Errorf("insecure suite %s accepted", suite.Name)
		}
	}
}

func isECDSASuite(s *tls.CipherSuite) bool {
	return bytes.Contains([]byte(s.Name), []byte("ECDSA"))
}

// TestServer_SlowBodyIsCutOff sends headers and then a body one byte at a
// time: the connection is closed once the read deadline passes.
func TestServer_SlowBodyIsCutOff(t *testing.T) {
	pki := newTestPKI(t)
	addr := startTestServer(t, pki, ServerOptions{ReadTimeout: 300 * time.Millisecond, ReadHeaderTimeout: 300 * time.Millisecond}, nil)
	conn := slowClient(t, addr, pki)
	defer conn.Close()
	closed := make(chan error, 1)
	go func() {
		for {
			if _, err := conn.Write([]byte("x")); err != nil {
				closed <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("a body sent a byte at a time kept its connection open")
	}
}

// slowClient opens a connection and sends the headers of a request whose
// body never completes.
func slowClient(t *testing.T, addr string, pki testPKI) net.Conn {
	t.Helper()
	return slowClientOf(t, addr, pki, 100000)
}

// slowClientOf is slowClient announcing a body of size bytes.
func slowClientOf(t *testing.T, addr string, pki testPKI, size int) net.Conn {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", size); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestServer_CapEvictsSlowClients fills the connection cap with slow
// clients: a compliant request still gets its answer, because it evicts the
// client stuck longest.
func TestServer_CapEvictsSlowClients(t *testing.T) {
	pki := newTestPKI(t)
	var evicted atomic.Int64
	addr := startTestServer(t, pki, ServerOptions{MaxConnections: 4}, func() { evicted.Add(1) })
	for range 10 {
		conn := slowClient(t, addr, pki)
		defer conn.Close()
	}
	got, err := post(t, addr, &tls.Config{RootCAs: pki.pool})
	if err != nil || got != "authenticated=false" {
		t.Fatalf("compliant request at the cap: %q, %v", got, err)
	}
	if evicted.Load() == 0 {
		t.Error("no connection was evicted at the cap")
	}
}

// laneEntered and laneHold let a test keep a request in laneReporter.
var laneEntered, laneHold chan struct{}

// laneReporter answers which heavy lane the request's evaluation would
// enter: "held" when the server gave it a slot for its large body, "shared"
// when it would queue in the server's lane. With ?hold it waits for laneHold.
func laneReporter(w http.ResponseWriter, r *http.Request) {
	if _, err := io.ReadAll(r.Body); err != nil {
		return
	}
	if r.URL.Query().Has("hold") {
		laneEntered <- struct{}{}
		<-laneHold
	}
	use, _ := r.Context().Value(laneKey{}).(*laneUse)
	switch {
	case use == nil:
		fmt.Fprint(w, "none")
	case use.held:
		fmt.Fprint(w, "held")
	default:
		fmt.Fprint(w, "shared")
	}
}

// TestServer_LargeBodiesWaitForTheHeavyLane: with the one slot of a
// two-core lane taken by a large review, a small review is answered at once,
// another large one waits and is refused as busy after half the read
// deadline, or half the API server's ?timeout= when that is shorter; a
// client that announces a large body and sends none never takes the slot.
func TestServer_LargeBodiesWaitForTheHeavyLane(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	laneEntered, laneHold = make(chan struct{}, 1), make(chan struct{})
	// Whatever happens, the held review is let go when the test ends.
	letGo := sync.OnceFunc(func() { close(laneHold) })
	t.Cleanup(letGo)
	pki := newTestPKI(t)
	addr := startTestServer(t, pki, ServerOptions{ReadTimeout: 4 * time.Second}, nil)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}}
	defer client.CloseIdleConnections()
	send := func(path string, size int) (int, string) {
		resp, err := client.Post("https://"+addr+path, "application/json", bytes.NewReader(bytes.Repeat([]byte(" "), size)))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	large := LargeReviewBytes + 1

	// A large body announced and never sent holds a connection, not the lane.
	silent := slowClientOf(t, addr, pki, large)
	defer silent.Close()
	if code, body := send("/lane", large); code != http.StatusOK || body != "held" {
		t.Fatalf("large review beside an unsent large body: %d %q, want 200 held", code, body)
	}

	first := make(chan string, 1)
	go func() {
		code, body := send("/lane?hold", large)
		first <- fmt.Sprint(code, " ", body)
	}()
	select {
	case <-laneEntered:
	case <-time.After(laneWait):
		t.Fatalf("a large review with the lane free did not reach its handler within %s", laneWait)
	}

	if code, body := send("/lane", 1000); code != http.StatusOK || body != "shared" {
		t.Errorf("small review while the lane is full: %d %q, want 200 shared", code, body)
	}
	for _, tc := range []struct {
		path     string
		min, max time.Duration
	}{
		{"/lane", 1900 * time.Millisecond, 8 * time.Second},                   // half the 4 s read deadline
		{"/lane?timeout=1s", 450 * time.Millisecond, 1900 * time.Millisecond}, // half the API server's timeout
	} {
		start := time.Now()
		code, body := send(tc.path, large)
		waited := time.Since(start)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "busy") {
			t.Errorf("%s, large review while the lane is full: %d %q, want 503 busy", tc.path, code, body)
		}
		if waited < tc.min || waited > tc.max {
			t.Errorf("%s: refused after %s, want between %s and %s", tc.path, waited, tc.min, tc.max)
		}
	}

	letGo()
	select {
	case got := <-first:
		if got != "200 held" {
			t.Errorf("the large review holding the lane: %q, want 200 held", got)
		}
	case <-time.After(laneWait):
		t.Fatalf("the large review holding the lane was not answered within %s of its release", laneWait)
	}
}

// TestServer_LargeBodiesWithinTheirBudget: bodies are reserved in the
// budget as they arrive, so clients that announce the largest review and
// send nothing hold none of it and a large review passes beside them; they
// are cut off at the body pace, long before the read deadline, and counted.
func TestServer_LargeBodiesWithinTheirBudget(t *testing.T) {
	pki := newTestPKI(t)
	large := LargeReviewBytes + 1
	refusals := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "r"}, []string{"reason", "caller"})
	addr := startTestServer(t, pki, ServerOptions{ReadTimeout: 10 * time.Second, BodyGrace: 500 * time.Millisecond,
		LargeBodyBudget: int64(maxReviewBytes + 1), Refusals: refusals}, nil)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}}
	defer client.CloseIdleConnections()
	var silent []net.Conn
	for range 6 {
		c := slowClientOf(t, addr, pki, maxReviewBytes)
		defer c.Close()
		silent = append(silent, c)
	}
	resp, err := client.Post("https://"+addr+"/lane", "application/json", bytes.NewReader(bytes.Repeat([]byte(" "), large)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "held" {
		t.Errorf("large review beside six silent announced bodies: %d %q, want 200 held", resp.StatusCode, body)
	}
	start := time.Now()
	for _, c := range silent {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("a silent client was not cut off within 5 s: %v", err)
		}
	}
	if waited := time.Since(start); waited > 4*time.Second {
		t.Errorf("silent clients cut off after %s, want about the 0.5 s grace", waited)
	}
	if got := testutil.ToFloat64(refusals.WithLabelValues(RefusedSlowBody, CallerUnknown)); got != 6 {
		t.Errorf("slow-body refusals = %v, want 6", got)
	}
}

func TestConnGuard_EvictionOrder(t *testing.T) {
	g := newConnGuard(nil, 10, nil)
	old := time.Now().Add(-time.Minute)
	conn := func(source string, trusted bool, p phase, since time.Time) *guardedConn {
		c := &guardedConn{g: g, source: source, trusted: trusted, phase: p, since: since}
		g.conns[c] = struct{}{}
		g.sources[source]++
		return c
	}
	apiIdle := conn("10.0.0.1", true, phaseIdle, old.Add(-time.Hour))
	apiReading := conn("10.0.0.1", true, phaseReading, old.Add(-time.Hour))
	busy := conn("10.0.0.9", false, phaseBusy, old.Add(-time.Hour))
	// A lone source's connection, older than the flood's: the flood's go
	// first all the same.
	oneReading := conn("10.0.0.2", false, phaseReading, old.Add(-time.Hour))
	floodIdle := conn("10.0.0.3", false, phaseIdle, old)
	floodWaiting := conn("10.0.0.3", false, phaseWaiting, old)
	floodReadingNew := conn("10.0.0.3", false, phaseReading, time.Now())
	floodReadingOld := conn("10.0.0.3", false, phaseReading, old)
	for i, want := range []*guardedConn{floodReadingOld, floodReadingNew, floodWaiting, oneReading, floodIdle, apiReading, apiIdle, nil} {
		got := g.victim()
		if got != want {
			t.Fatalf("eviction %d: got %+v, want %+v", i, got, want)
		}
		if got != nil {
			g.forget(got)
		}
	}
	if _, ok := g.conns[busy]; !ok {
		t.Error("a connection being judged was evicted")
	}
}

func TestThrottledLog_OneLinePerInterval(t *testing.T) {
	var out bytes.Buffer
	l := &throttledLog{out: &out, interval: time.Hour}
	for range 1000 {
		fmt.Fprintln(l, "http: TLS handshake error from 127.0.0.1:1: EOF")
	}
	if got := strings.Count(out.String(), "\n"); got != 1 {
		t.Fatalf("%d lines written, want 1:\n%s", got, out.String())
	}
	l.last = time.Time{}
	fmt.Fprintln(l, "next")
	if !strings.Contains(out.String(), "999 similar messages suppressed") {
		t.Errorf("the suppressed count is not reported:\n%s", out.String())
	}
}

// TestServer_ConcurrentReviewsKeepTheirOwnBodies sends reviews of different
// sizes and verdicts at once over kept-alive connections, each with a UID of
// its own: body buffers pass from request to request, and every answer must
// still be the one its own review earns.
func TestServer_ConcurrentReviewsKeepTheirOwnBodies(t *testing.T) {
	pki := newTestPKI(t)
	h, _, _ := newTestHandler(t, "")
	addr := startTestServer(t, pki, ServerOptions{}, nil, func(s *Server) { s.Register(DaemonSetPath, h.HTTPHandler()) })
	// Denied reviews are the smaller ones: a buffer a larger, allowed
	// review left behind must not leak into them, nor the other way round.
	allowed := compliantDS(func(ds *appsv1.DaemonSet) {
		ds.Annotations = map[string]string{"note": strings.Repeat("padding ", 2000)}
	})
	denied := compliantDS(noTolerations)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	const workers, each = 8, 40
	// The bodies are made here: the helpers may stop the test, which only
	// the test's own goroutine may do.
	type review struct {
		uid     types.UID
		body    []byte
		allowed bool
	}
	reviews := make([][]review, workers)
	for w := range workers {
		for i := range each {
			req := request(t, admissionv1.Create, allowed, nil)
			want := true
			if (w+i)%2 == 1 {
				req, want = request(t, admissionv1.Create, denied, nil), false
			}
			req.UID = types.UID(fmt.Sprintf("uid-%d-%d", w, i))
			reviews[w] = append(reviews[w], review{uid: req.UID, body: reviewBody(t, req), allowed: want})
		}
	}
	errs := make(chan error, workers*each)
	// One bound for all the reviews: if they are not all answered by then,
	// the test fails saying so rather than waiting for every client's own
	// timeout, one review after the other.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for _, rv := range reviews[w] {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+DaemonSetPath, bytes.NewReader(rv.body))
				if err != nil {
					errs <- err
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				var out admissionv1.AdmissionReview
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				switch {
				case err != nil:
					errs <- err
				case out.Response == nil || out.Response.UID != rv.uid || out.Response.Allowed != rv.allowed:
					errs <- fmt.Errorf("review %s (allowed %v): answer %+v", rv.uid, rv.allowed, out.Response)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		<-done // the requests end with the context
		t.Fatalf("%d reviews were not all answered within a minute", workers*each)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
