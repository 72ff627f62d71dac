// Package metricsauth guards the metrics endpoint the way the API server
// guards its own non-resource URLs: the bearer token is authenticated with a
// TokenReview and the request is authorized with a SubjectAccessReview for
// its path and verb. So a Prometheus ServiceAccount bound to a ClusterRole
// with `nonResourceURLs: ["/metrics"], verbs: ["get"]` may scrape, and
// nothing else may.
//
// It does what controller-runtime's filters.WithAuthenticationAndAuthorization
// does, with the same cache lifetimes and retries, without linking
// k8s.io/apiserver: that package brings CEL, OpenTelemetry and gRPC into the
// webhook's process, whose package initialisation alone costs several MiB of
// memory in every replica.
package metricsauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options tune the guard. The zero value of a field takes the default, which
// is what the API server's delegated authentication and authorization use.
type Options struct {
	// TokenTTL is how long a token's review is remembered, whether the token
	// was accepted or rejected (1 minute).
	TokenTTL time.Duration
	// AllowTTL and DenyTTL are how long an access review's answer is
	// remembered (5 minutes and 30 seconds).
	AllowTTL, DenyTTL time.Duration
	// Timeout bounds each review, its retries included (10 seconds, as
	// the API server bounds its token reviews), so that a scrape is
	// answered within a scraper's usual timeout.
	Timeout time.Duration
	// Retries is how many times a review that failed for a transient reason
	// (a timeout, 429, a 5xx, a broken connection) is tried again, after
	// 0.5 s, then 1.5 times longer each time (4: five attempts in all, as
	// the API server's delegated authentication makes).
	Retries int
	// MaxEntries bounds each cache, so that a flood of made-up tokens cannot
	// grow the process (4096). A full cache answers by asking the API server.
	MaxEntries int
	// ReviewsPerSecond and ReviewBurst bound the token reviews of tokens the
	// guard has not seen authenticated within KnownTokenTTL (5 per second,
	// bursts of 20): a flood of made-up tokens, each new, would otherwise
	// cost the API server a review each. A token over the bound is answered
	// 429 without a review; a token once authenticated (Prometheus') is
	// reviewed again when its answer lapses, whatever the flood.
	ReviewsPerSecond float64
	ReviewBurst      int
	// KnownTokenTTL is how long a token that was authenticated stays exempt
	// from that bound (1 hour).
	KnownTokenTTL time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// Sleep waits between retries (a timer that stops with the context).
	Sleep func(context.Context, time.Duration) error
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.TokenTTL, time.Minute)
	def(&o.AllowTTL, 5*time.Minute)
	def(&o.DenyTTL, 30*time.Second)
	def(&o.Timeout, 10*time.Second)
	if o.Retries == 0 {
		o.Retries = 4
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = 4096
	}
	if o.ReviewsPerSecond == 0 {
		o.ReviewsPerSecond = 5
	}
	if o.ReviewBurst == 0 {
		o.ReviewBurst = 20
	}
	def(&o.KnownTokenTTL, time.Hour)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	return o
}

// Guard authenticates and authorizes requests through the API server.
type Guard struct {
	tokens  authenticationclient.TokenReviewInterface
	access  authorizationclient.SubjectAccessReviewInterface
	o       Options
	hashKey []byte // keys the token cache, so tokens are never held

	users     *expiring[tokenAnswer]
	decisions *expiring[bool]
	// known are the tokens seen authenticated; unknown ones are reviewed
	// within newReviews.
	known      *expiring[struct{}]
	newReviews *rate.Limiter
}

// ErrTooManyReviews is the answer to a token the guard has not seen
// authenticated while new tokens arrive faster than it reviews them.
var ErrTooManyReviews = errors.New("too many new bearer tokens to review")

// tokenAnswer is a token review's outcome: the user, or not authenticated.
type tokenAnswer struct {
	user          authenticationv1.UserInfo
	authenticated bool
}

// New returns a guard that sends its reviews to tokens and access.
func New(tokens authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface, o Options) (*Guard, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	return &Guard{
		tokens: tokens, access: access, o: o, hashKey: key,
		users:      newExpiring[tokenAnswer](o.MaxEntries, o.Now),
		decisions:  newExpiring[bool](o.MaxEntries, o.Now),
		known:      newExpiring[struct{}](o.MaxEntries, o.Now),
		newReviews: rate.NewLimiter(rate.Limit(o.ReviewsPerSecond), o.ReviewBurst),
	}, nil
}

// FilterProvider is a metricsserver.Options.FilterProvider: the guard with
// the default options, reviewing through the manager's own connection.
func FilterProvider(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	g, err := New(authn.TokenReviews(), authz.SubjectAccessReviews(), Options{})
	if err != nil {
		return nil, err
	}
	return g.Filter, nil
}

// Filter wraps handler: 401 without a valid bearer token, 429 for a new
// token beyond the bound on token reviews, 403 when the token's user may not
// use the method on the path, 500 when the API server could not answer, and
// otherwise the handler.
func (g *Guard) Filter(log logr.Logger, handler http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, ok, err := g.authenticate(req)
		if errors.Is(err, ErrTooManyReviews) {
			log.V(4).Info("Authentication deferred: too many new tokens")
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too many new bearer tokens; retry later", http.StatusTooManyRequests)
			return
		}
		if err != nil {
			log.Error(err, "Authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if !ok {
			log.V(4).Info("Authentication failed")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		allowed, err := g.authorize(req.Context(), user, req.URL.Path, strings.ToLower(req.Method))
		if err != nil {
			msg := fmt.Sprintf("Authorization for user %s failed", user.Username)
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if !allowed {
			msg := fmt.Sprintf("Authorization denied for user %s", user.Username)
			log.V(4).Info(msg)
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		handler.ServeHTTP(w, req)
	}), nil
}

// bearerToken returns the request's bearer token, read as the API server
// reads it: "Bearer" in any case, then the token; anything else is none.
func bearerToken(req *http.Request) string {
	parts := strings.SplitN(strings.TrimSpace(req.Header.Get("Authorization")), " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") {
		return ""
	}
	return parts[1]
}

func (g *Guard) authenticate(req *http.Request) (authenticationv1.UserInfo, bool, error) {
	token := bearerToken(req)
	if token == "" {
		return authenticationv1.UserInfo{}, false, nil
	}
	mac := hmac.New(sha256.New, g.hashKey)
	mac.Write([]byte(token))
	key := string(mac.Sum(nil))
	if a, ok := g.users.get(key); ok {
		return a.user, a.authenticated, nil
	}
	if _, known := g.known.get(key); !known && !g.newReviews.AllowN(g.o.Now(), 1) {
		return authenticationv1.UserInfo{}, false, ErrTooManyReviews
	}
	var status authenticationv1.TokenReviewStatus
	err := g.retry(req.Context(), func(ctx context.Context) error {
		r, err := g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err == nil {
			status = r.Status
		}
		return err
	})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("token review: %w", err)
	}
	if status.Error != "" && !status.Authenticated {
		// The API server could not judge the token (an unreachable
		// authenticator): not remembered, as with any other error.
		return authenticationv1.UserInfo{}, false, fmt.Errorf("token review: %s", status.Error)
	}
	a := tokenAnswer{user: status.User, authenticated: status.Authenticated}
	g.users.put(key, a, g.o.TokenTTL)
	if a.authenticated {
		g.known.put(key, struct{}{}, g.o.KnownTokenTTL)
	}
	return a.user, a.authenticated, nil
}

// ReviewSpec is a SubjectAccessReview's subject: the user, their groups,
// UID and extra attributes (which an authorizer may weigh: scopes, the node
// a token was bound to), for the caller to add what is asked.
func ReviewSpec(user authenticationv1.UserInfo) authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{User: user.Username, Groups: user.Groups, UID: user.UID}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	return spec
}

func (g *Guard) authorize(ctx context.Context, user authenticationv1.UserInfo, path, verb string) (bool, error) {
	spec := ReviewSpec(user)
	spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: path, Verb: verb}
	key := decisionKey(spec)
	if allowed, ok := g.decisions.get(key); ok {
		return allowed, nil
	}
	var status authorizationv1.SubjectAccessReviewStatus
	err := g.retry(ctx, func(ctx context.Context) error {
		r, err := g.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err == nil {
			status = r.Status
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	// Denied, or no authorizer had an opinion: either way not allowed.
	allowed := status.Allowed && !status.Denied
	ttl := g.o.DenyTTL
	if allowed {
		ttl = g.o.AllowTTL
	}
	g.decisions.put(key, allowed, ttl)
	return allowed, nil
}

// decisionKey names everything an access review's answer depends on.
func decisionKey(s authorizationv1.SubjectAccessReviewSpec) string {
	var b strings.Builder
	field := func(v string) { fmt.Fprintf(&b, "%d:%s", len(v), v) }
	field(s.User)
	field(s.UID)
	field(s.NonResourceAttributes.Path)
	field(s.NonResourceAttributes.Verb)
	groups := slices.Sorted(slices.Values(s.Groups))
	fmt.Fprintf(&b, "g%d", len(groups))
	for _, g := range groups {
		field(g)
	}
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintf(&b, "e%d", len(keys))
	for _, k := range keys {
		field(k)
		fmt.Fprintf(&b, "v%d", len(s.Extra[k]))
		for _, v := range s.Extra[k] {
			field(v)
		}
	}
	return b.String()
}

// retry calls review, and again after a transient failure, at most Retries
// more times, all within Timeout.
func (g *Guard) retry(ctx context.Context, review func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	// The pauses come from apimachinery's Backoff; the sleeping is Options'
	// own, so that tests need not wait.
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Steps: g.o.Retries}
	for {
		err := review(ctx)
		if err == nil || backoff.Steps <= 0 || !transient(err) || ctx.Err() != nil {
			return err
		}
		if err := g.o.Sleep(ctx, backoff.Step()); err != nil {
			return err
		}
	}
}

// transient reports whether a review may succeed when tried again: any
// failure but an answer that says the request itself is wrong or refused.
func transient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= 500 || code == 0
	}
	return true
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
