package faults

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// policyVersion is the policy document of version v: max-unavailable warns
// above an absolute cap of 1000+v, so the warning on a DaemonSet with a
// larger maxUnavailable names the version that judged it. The built-in
// defaults have no absolute cap and never say "cap of".
func policyVersion(v int) string {
	return fmt.Sprintf(`apiVersion: dsguard.io/v1alpha1
kind: PolicyConfig
rules:
  max-unavailable:
    action: warn
    parameters:
      maxPercent: 100
      maxCount: %d
`, 1000+v)
}

var capOf = regexp.MustCompile(`max-unavailable: maxUnavailable 5000 is above the cap of (\d+)`)

// versionOf returns the policy version a verdict came from, or an error
// when it came from no version this test wrote (the defaults, say).
func versionOf(v verdict) (int, error) {
	if v.denied {
		return 0, fmt.Errorf("denied, want a warning: %s", v.message)
	}
	for _, w := range v.warnings {
		if m := capOf.FindStringSubmatch(w); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n - 1000, nil
		}
	}
	return 0, fmt.Errorf("no version's warning among %q", v.warnings)
}

// setPolicy writes the policy ConfigMap's document.
func setPolicy(ctx context.Context, doc string) error {
	cms := kube.CoreV1().ConfigMaps(framework.Namespace)
	cm, err := cms.Get(ctx, "dsguard-policy", metav1.GetOptions{})
	if err != nil {
		return err
	}
	cm.Data["policy.yaml"] = doc
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// restorePolicy puts the chart's policy back after a test.
func restorePolicy(t *testing.T) {
	t.Cleanup(func() {
		if err := setPolicy(context.Background(), "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: enforce\n"); err != nil {
			t.Errorf("restoring the policy: %v", err)
		}
	})
}

// directReviewer sends AdmissionReviews straight to one replica, bypassing
// the API server, so that a response is known to come from that replica.
type directReviewer struct {
	client *http.Client
	body   []byte
}

func newDirectReviewer(t *testing.T, ds *appsv1.DaemonSet) *directReviewer {
	t.Helper()
	raw, err := json.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("faults-direct"),
			Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"},
			Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"},
			Name:      ds.Name,
			Namespace: ds.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cluster.Replicas().CA.PEM)
	return &directReviewer{body: body, client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}}
}

func (d *directReviewer) review(r *framework.Replica) (verdict, error) {
	resp, err := d.client.Post("https://"+r.Addr+"/validate-daemonset", "application/json", bytes.NewReader(d.body))
	if err != nil {
		return verdict{}, err
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return verdict{}, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	if out.Response == nil {
		return verdict{}, fmt.Errorf("HTTP %d: no response in the review", resp.StatusCode)
	}
	if !out.Response.Allowed {
		return verdict{denied: true, message: out.Response.Result.Message}, nil
	}
	return verdict{warnings: out.Response.Warnings}, nil
}

// TestPolicyEdits_EveryResponseFromAWrittenPolicy edits the policy ConfigMap
// 100 times in 60 seconds while reviews flow through the API server and
// straight to each replica. Every verdict must come from a version this test
// wrote (never the built-in defaults, never one not yet written); each
// replica's versions only move forward; and both end on the last one.
func TestPolicyEdits_EveryResponseFromAWrittenPolicy(t *testing.T) {
	restorePolicy(t)
	ds := example(t, "node-exporter-tolerations.yaml", "default")
	ds.Name = "policy-probe"
	five := intstr.FromInt32(5000)
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &five
	direct := newDirectReviewer(t, ds)
	replicas := cluster.Replicas().Members()

	if err := setPolicy(t.Context(), policyVersion(0)); err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas {
		waitFor(t, r.Name+" loads version 0", 30*time.Second, func() (bool, string) {
			v, err := direct.review(r)
			if err != nil {
				return false, err.Error()
			}
			n, err := versionOf(v)
			return err == nil && n == 0, fmt.Sprint(n, err)
		})
	}

	var written atomic.Int64 // the newest version whose write has begun
	var mu sync.Mutex
	var problems []string
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	// check accepts a verdict when it names a version written by now.
	check := func(v verdict) (int, error) {
		ceiling := written.Load() // read before the verdict is judged: versions only grow
		n, err := versionOf(v)
		if err != nil {
			return 0, err
		}
		if n < 0 || n > int(ceiling) {
			return n, fmt.Errorf("version %d was not written yet (newest %d)", n, ceiling)
		}
		return n, nil
	}

	through := startLoad(t.Context(), "reviews through the API server", 2, 20*time.Millisecond, nil,
		func(ctx context.Context) error {
			v, err := review(ctx, ds)
			if err != nil {
				return err
			}
			_, err = check(v)
			return err
		})
	var straight []*load
	for _, r := range replicas {
		last := -1
		straight = append(straight, startLoad(t.Context(), "reviews straight to "+r.Name, 1, 20*time.Millisecond, nil,
			func(context.Context) error {
				v, err := direct.review(r)
				if err != nil {
					return err
				}
				n, err := check(v)
				if err != nil {
					return err
				}
				if n < last {
					problem("%s went back from version %d to %d", r.Name, last, n)
				}
				last = n
				return nil
			}))
	}

	start := time.Now()
	edits, editFailures := 0, 0
	for v := 1; v <= 100; v++ {
		time.Sleep(time.Until(start.Add(time.Duration(v) * 600 * time.Millisecond)))
		// A replica may see the edit before Update returns here.
		written.Store(int64(v))
		if err := setPolicy(t.Context(), policyVersion(v)); err != nil {
			editFailures++
			problem("edit %d: %v", v, err)
			continue
		}
		edits++
	}
	t.Logf("figures: %d policy edits in %s, %d failed", edits, time.Since(start).Round(time.Millisecond), editFailures)

	for _, r := range replicas {
		took := waitFor(t, r.Name+" reaches the last version", 10*time.Second, func() (bool, string) {
			v, err := direct.review(r)
			if err != nil {
				return false, err.Error()
			}
			n, err := versionOf(v)
			return err == nil && n == 100, fmt.Sprint(n, err)
		})
		gen, err := r.Metric("dsguard_policy_generation")
		t.Logf("figures: %s on the last version %s after the last edit; dsguard_policy_generation %v (%v)", r.Name,
			took.Round(time.Millisecond), gen, err)
	}
	through.stop(t)
	for _, l := range straight {
		l.stop(t)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if editFailures > 0 {
		t.Errorf("%d edits failed", editFailures)
	}
}
