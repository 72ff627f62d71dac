package webhook

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServer_FirstRequestOfAPooledConnection: an HTTP client dials ahead and
// keeps the connection in its pool (the API server's transport does, when a
// request it dialed for was served by another connection, and after every
// caBundle change), so the first request may come long after the handshake.
// Its body is paced from when that request arrives, not from the accept: a
// review sent whole, at once, is judged.
func TestServer_FirstRequestOfAPooledConnection(t *testing.T) {
	pki := newTestPKI(t)
	const grace = 300 * time.Millisecond
	addr := startTestServer(t, pki, ServerOptions{ReadTimeout: 10 * time.Second, BodyGrace: grace}, nil)
	for _, idle := range []time.Duration{0, 3 * grace, 8 * grace} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(idle)
		// Larger than what net/http buffers with the headers, as a
		// DaemonSet's review is: the rest is read from the connection.
		body := `{"kind":"AdmissionReview","pad":"` + strings.Repeat("x", 32<<10) + `"}`
		if _, err := fmt.Fprintf(conn, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("first request %s after the handshake: %v", idle, err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("first request %s after the handshake, body sent at once: %s, want 200", idle, resp.Status)
		}
	}
}
