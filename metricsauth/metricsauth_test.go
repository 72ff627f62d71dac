package metricsauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// apiServer stands in for the API server's review endpoints: tokens maps a
// token to its user, allowed names what "user path verb" may do, and the
// failures are returned, in turn, before any answer.
type apiServer struct {
	tokens          map[string]authenticationv1.UserInfo
	allowed         map[string]bool
	denied          map[string]bool
	tokenErrors     []error
	accessErrors    []error
	tokenStatusErr  string
	tokenReviews    int
	accessReviews   int
	lastAccessSpecs []authorizationv1.SubjectAccessReviewSpec
}

func (s *apiServer) guard(t *testing.T, o Options) *Guard {
	t.Helper()
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", s.react(&s.tokenReviews, &s.tokenErrors, func(obj runtime.Object) runtime.Object {
		r := obj.(*authenticationv1.TokenReview).DeepCopy()
		if u, ok := s.tokens[r.Spec.Token]; ok {
			r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		}
		r.Status.Error = s.tokenStatusErr
		return r
	}))
	c.PrependReactor("create", "subjectaccessreviews", s.react(&s.accessReviews, &s.accessErrors, func(obj runtime.Object) runtime.Object {
		r := obj.(*authorizationv1.SubjectAccessReview).DeepCopy()
		s.lastAccessSpecs = append(s.lastAccessSpecs, r.Spec)
		key := r.Spec.User + " " + r.Spec.NonResourceAttributes.Path + " " + r.Spec.NonResourceAttributes.Verb
		r.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: s.allowed[key], Denied: s.denied[key]}
		return r
	}))
	if o.Sleep == nil {
		o.Sleep = func(context.Context, time.Duration) error { return nil }
	}
	g, err := New(c.AuthenticationV1().TokenReviews(), c.AuthorizationV1().SubjectAccessReviews(), o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// react counts a review and fails it with the next of errs, if any, or
// answers it.
func (s *apiServer) react(count *int, errs *[]error, answer func(runtime.Object) runtime.Object) clienttesting.ReactionFunc {
	return func(a clienttesting.Action) (bool, runtime.Object, error) {
		*count++
		if len(*errs) > 0 {
			err := (*errs)[0]
			*errs = (*errs)[1:]
			return true, nil, err
		}
		return true, answer(a.(clienttesting.CreateAction).GetObject()), nil
	}
}

// serve sends one request through the guard and returns the status code.
func serve(t *testing.T, g *Guard, method, path, authorization string) (int, string) {
	t.Helper()
	h, err := g.Filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "metrics")
	}))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(t.Context(), method, path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

func prometheusServer() *apiServer {
	return &apiServer{
		tokens: map[string]authenticationv1.UserInfo{
			"prom-token":   {Username: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts"}},
			"nobody-token": {Username: "system:serviceaccount:monitoring:nobody"},
		},
		allowed: map[string]bool{"system:serviceaccount:monitoring:prometheus /metrics get": true},
	}
}

var errUnavailable = apierrors.NewServiceUnavailable("etcd is away")

func TestFilter_AnswersAsTheAPIServerDecides(t *testing.T) {
	for _, c := range []struct {
		name          string
		server        func(*apiServer)
		method, path  string
		authorization string
		wantCode      int
		wantBody      string
		wantTokens    int
		wantAccess    int
	}{
		{name: "allowed", authorization: "Bearer prom-token", wantCode: 200, wantBody: "metrics", wantTokens: 1, wantAccess: 1},
		{name: "bearer in any case", authorization: "bEaReR prom-token", wantCode: 200, wantBody: "metrics", wantTokens: 1, wantAccess: 1},
		{name: "surrounding spaces", authorization: "  Bearer prom-token  ", wantCode: 200, wantBody: "metrics", wantTokens: 1, wantAccess: 1},
		{name: "no header", wantCode: 401, wantBody: "Unauthorized"},
		{name: "another scheme", authorization: "Basic cHJvbTpwcm9t", wantCode: 401, wantBody: "Unauthorized"},
		{name: "bearer without a token", authorization: "Bearer", wantCode: 401, wantBody: "Unauthorized"},
		{name: "bearer with an empty token", authorization: "Bearer  prom-token", wantCode: 401, wantBody: "Unauthorized"},
		{name: "unknown token", authorization: "Bearer made-up", wantCode: 401, wantBody: "Unauthorized", wantTokens: 1},
		{name: "user without the permission", authorization: "Bearer nobody-token", wantCode: 403,
			wantBody: "Authorization denied for user system:serviceaccount:monitoring:nobody", wantTokens: 1, wantAccess: 1},
		{name: "permission for get only", method: http.MethodPost, authorization: "Bearer prom-token", wantCode: 403,
			wantBody: "Authorization denied for user system:serviceaccount:monitoring:prometheus", wantTokens: 1, wantAccess: 1},
		{name: "permission for /metrics only", path: "/debug/pprof/", authorization: "Bearer prom-token", wantCode: 403,
			wantBody: "Authorization denied for user system:serviceaccount:monitoring:prometheus", wantTokens: 1, wantAccess: 1},
		{name: "allowed and denied: denied wins", authorization: "Bearer prom-token", wantCode: 403,
			server: func(s *apiServer) {
				s.denied = map[string]bool{"system:serviceaccount:monitoring:prometheus /metrics get": true}
			},
			wantBody: "Authorization denied for user system:serviceaccount:monitoring:prometheus", wantTokens: 1, wantAccess: 1},
		{name: "token review unavailable, then answered", authorization: "Bearer prom-token", wantCode: 200, wantBody: "metrics",
			server:     func(s *apiServer) { s.tokenErrors = []error{errUnavailable, errUnavailable} },
			wantTokens: 3, wantAccess: 1},
		{name: "token review unavailable throughout", authorization: "Bearer prom-token", wantCode: 500, wantBody: "Authentication failed",
			server: func(s *apiServer) {
				s.tokenErrors = []error{errUnavailable, errUnavailable, errUnavailable, errUnavailable, errUnavailable}
			},
			wantTokens: 5},
		{name: "token review forbidden: not tried again", authorization: "Bearer prom-token", wantCode: 500, wantBody: "Authentication failed",
			server: func(s *apiServer) {
				s.tokenErrors = []error{apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("no RBAC"))}
			},
			wantTokens: 1},
		{name: "token review that could not judge", authorization: "Bearer made-up", wantCode: 500, wantBody: "Authentication failed",
			server: func(s *apiServer) { s.tokenStatusErr = "webhook authenticator unreachable" }, wantTokens: 1},
		{name: "access review unavailable, then answered", authorization: "Bearer prom-token", wantCode: 200, wantBody: "metrics",
			server:     func(s *apiServer) { s.accessErrors = []error{errUnavailable} },
			wantTokens: 1, wantAccess: 2},
		{name: "access review too many requests throughout", authorization: "Bearer prom-token", wantCode: 500,
			wantBody: "Authorization for user system:serviceaccount:monitoring:prometheus failed",
			server: func(s *apiServer) {
				for range 5 {
					s.accessErrors = append(s.accessErrors, apierrors.NewTooManyRequests("slow down", 1))
				}
			},
			wantTokens: 1, wantAccess: 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := prometheusServer()
			if c.server != nil {
				c.server(s)
			}
			method, path := c.method, c.path
			if method == "" {
				method = http.MethodGet
			}
			if path == "" {
				path = "/metrics"
			}
			code, body := serve(t, s.guard(t, Options{}), method, path, c.authorization)
			if code != c.wantCode || body != c.wantBody {
				t.Errorf("got %d %q, want %d %q", code, body, c.wantCode, c.wantBody)
			}
			if s.tokenReviews != c.wantTokens || s.accessReviews != c.wantAccess {
				t.Errorf("reviews: %d token, %d access; want %d and %d", s.tokenReviews, s.accessReviews, c.wantTokens, c.wantAccess)
			}
		})
	}
}

func TestFilter_AccessReviewCarriesTheWholeUser(t *testing.T) {
	s := &apiServer{tokens: map[string]authenticationv1.UserInfo{"t": {
		Username: "alice", UID: "u-1", Groups: []string{"b", "a"},
		Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prom-0"}},
	}}}
	serve(t, s.guard(t, Options{}), http.MethodGet, "/metrics", "Bearer t")
	if len(s.lastAccessSpecs) != 1 {
		t.Fatalf("%d access reviews, want 1", len(s.lastAccessSpecs))
	}
	got := s.lastAccessSpecs[0]
	if got.User != "alice" || got.UID != "u-1" || strings.Join(got.Groups, ",") != "b,a" ||
		strings.Join(got.Extra["authentication.kubernetes.io/pod-name"], ",") != "prom-0" ||
		got.NonResourceAttributes == nil || *got.NonResourceAttributes != (authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}) ||
		got.ResourceAttributes != nil {
		t.Errorf("access review spec %+v", got)
	}
}

// TestFilter_RemembersAnswersForTheirLifetime: a scrape every few seconds
// costs no review until an answer lapses; errors are not remembered.
func TestFilter_RemembersAnswersForTheirLifetime(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := prometheusServer()
	g := s.guard(t, Options{Now: func() time.Time { return now }})
	scrape := func(token string, wantCode int) {
		t.Helper()
		if code, _ := serve(t, g, http.MethodGet, "/metrics", "Bearer "+token); code != wantCode {
			t.Fatalf("scrape with %s at %s: %d, want %d", token, now.Format(time.TimeOnly), code, wantCode)
		}
	}
	reviews := func(wantTokens, wantAccess int) {
		t.Helper()
		if s.tokenReviews != wantTokens || s.accessReviews != wantAccess {
			t.Fatalf("at %s: %d token and %d access reviews, want %d and %d",
				now.Format(time.TimeOnly), s.tokenReviews, s.accessReviews, wantTokens, wantAccess)
		}
	}
	scrape("prom-token", 200)
	scrape("prom-token", 200)
	scrape("nobody-token", 403)
	scrape("made-up", 401)
	reviews(3, 2)
	now = now.Add(29 * time.Second)
	scrape("prom-token", 200)
	scrape("nobody-token", 403)
	scrape("made-up", 401)
	reviews(3, 2)
	now = now.Add(2 * time.Second) // the denial lapses after 30 s
	scrape("nobody-token", 403)
	reviews(3, 3)
	now = now.Add(30 * time.Second) // the tokens lapse after 1 minute
	scrape("prom-token", 200)
	scrape("made-up", 401)
	reviews(5, 3)
	now = now.Add(4 * time.Minute) // the permission lapses after 5 minutes
	scrape("prom-token", 200)
	reviews(6, 4)

	s.tokenErrors = []error{errUnavailable, errUnavailable, errUnavailable, errUnavailable, errUnavailable}
	now = now.Add(2 * time.Minute)
	scrape("prom-token", 500)
	scrape("prom-token", 200) // the error was not remembered
	reviews(12, 4)
}

func TestFilter_BoundsWhatItRemembers(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := prometheusServer()
	g := s.guard(t, Options{MaxEntries: 3, Now: func() time.Time { return now }})
	for i := range 10 {
		if code, _ := serve(t, g, http.MethodGet, "/metrics", fmt.Sprintf("Bearer made-up-%d", i)); code != 401 {
			t.Fatalf("made-up token %d: %d, want 401", i, code)
		}
	}
	if n := len(g.users.entries); n != 3 {
		t.Fatalf("%d tokens remembered, want the bound of 3", n)
	}
	// The remembered tokens stay remembered; the next ones are reviewed.
	s.tokenReviews = 0
	serve(t, g, http.MethodGet, "/metrics", "Bearer made-up-0")
	serve(t, g, http.MethodGet, "/metrics", "Bearer prom-token")
	if s.tokenReviews != 1 {
		t.Errorf("%d token reviews, want 1 (made-up-0 remembered, prom-token not)", s.tokenReviews)
	}
	// Once they lapse, room is made again.
	now = now.Add(time.Minute)
	serve(t, g, http.MethodGet, "/metrics", "Bearer prom-token")
	if n := len(g.users.entries); n != 1 {
		t.Errorf("%d tokens remembered after the others lapsed, want 1", n)
	}
}

func TestFilter_HoldsNoToken(t *testing.T) {
	s := prometheusServer()
	g := s.guard(t, Options{})
	serve(t, g, http.MethodGet, "/metrics", "Bearer prom-token")
	for k := range g.users.entries {
		if strings.Contains(k, "prom-token") {
			t.Errorf("the token cache holds the token itself: %q", k)
		}
	}
}

func TestFilter_RetriesStopWithTheRequest(t *testing.T) {
	s := prometheusServer()
	s.tokenErrors = []error{errUnavailable, errUnavailable, errUnavailable, errUnavailable, errUnavailable}
	g := s.guard(t, Options{Sleep: sleep})
	h, _ := g.Filter(logr.Discard(), http.NotFoundHandler())
	ctx, cancel := context.WithCancel(t.Context())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer prom-token")
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		done <- rec.Code
	}()
	cancel()
	select {
	case code := <-done:
		if code != 500 {
			t.Errorf("cancelled request: %d, want 500", code)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the guard kept retrying after the request was cancelled")
	}
}

func TestFilter_RetriesStayWithinTheTimeout(t *testing.T) {
	s := prometheusServer()
	s.tokenErrors = []error{errUnavailable, errUnavailable, errUnavailable, errUnavailable, errUnavailable}
	g := s.guard(t, Options{Sleep: sleep, Timeout: 300 * time.Millisecond})
	start := time.Now()
	code, _ := serve(t, g, http.MethodGet, "/metrics", "Bearer prom-token")
	if took := time.Since(start); code != 500 || took > 2*time.Second {
		t.Errorf("unavailable API server: %d after %s, want 500 within the 300 ms timeout", code, took)
	}
	// The first wait (0.5 s) outlasts the timeout: one attempt only.
	if s.tokenReviews != 1 {
		t.Errorf("%d token reviews, want 1", s.tokenReviews)
	}
}

// TestFilter_BoundsReviewsOfNewTokens: a flood of made-up tokens costs at
// most the burst and then the rate of token reviews, each beyond answered
// 429; Prometheus' token, once seen authenticated, is reviewed again when
// its answer lapses, flood or not.
func TestFilter_BoundsReviewsOfNewTokens(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := prometheusServer()
	g := s.guard(t, Options{ReviewsPerSecond: 1, ReviewBurst: 5, Now: func() time.Time { return now }})
	if code, _ := serve(t, g, http.MethodGet, "/metrics", "Bearer prom-token"); code != 200 {
		t.Fatalf("prometheus: %d, want 200", code)
	}
	codes := map[int]int{}
	for i := range 100 {
		code, _ := serve(t, g, http.MethodGet, "/metrics", fmt.Sprintf("Bearer made-up-%d", i))
		codes[code]++
	}
	if s.tokenReviews != 5 || codes[401] != 4 || codes[429] != 96 {
		t.Errorf("100 made-up tokens: %d token reviews, answers %v; want 5 reviews (prom-token's and a burst of 4), 4×401, 96×429",
			s.tokenReviews, codes)
	}
	// Prometheus' answer lapses during the flood: it is reviewed again.
	now = now.Add(2 * time.Minute)
	for i := range 10 {
		serve(t, g, http.MethodGet, "/metrics", fmt.Sprintf("Bearer more-made-up-%d", i))
	}
	if code, _ := serve(t, g, http.MethodGet, "/metrics", "Bearer prom-token"); code != 200 {
		t.Errorf("prometheus during the flood: %d, want 200", code)
	}
	// A second later the rate admits one new token again.
	now = now.Add(time.Second)
	if code, _ := serve(t, g, http.MethodGet, "/metrics", "Bearer made-up-late"); code != 401 {
		t.Errorf("a made-up token a second later: %d, want 401 (reviewed)", code)
	}
}
