//go:build !offline

package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestProbeHandler_ServesControllerRuntimesPaths keeps the paths and answers
// of controller-runtime's probe server, which dsguard's replaces.
func TestProbeHandler_ServesControllerRuntimesPaths(t *testing.T) {
	h := probeHandler([]namedCheck{
		{"policy", func(*http.Request) error { return nil }},
		{"nodes", func(*http.Request) error { return errors.New("the node view is not built") }},
	})
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/healthz", http.StatusOK},
		{"/healthz/ping", http.StatusOK},
		{"/readyz", http.StatusInternalServerError},
		{"/readyz/policy", http.StatusOK},
		{"/readyz/nodes", http.StatusInternalServerError},
		{"/readyz?exclude=nodes", http.StatusOK},
		{"/metrics", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.want {
			t.Errorf("GET %s = %d, want %d: %s", tc.path, rec.Code, tc.want, rec.Body)
		}
	}
}
