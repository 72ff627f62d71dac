package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// fuzzNodeAgents is the cluster the Node fuzzer judges changes against:
// agents that tolerate everything, nothing, one taint, or select a pool, and
// ten that each lack the toleration of one taint dedicated-<k> of their own,
// so that a node gaining those taints loses agents for more distinct
// reasons than the warning cap allows.
func fuzzNodeAgents() (dss []appsv1.DaemonSet, withPod []string) {
	named := func(name string, mutate ...func(*appsv1.DaemonSet)) appsv1.DaemonSet {
		ds := compliantDS(mutate...)
		ds.Name = name
		return *ds
	}
	tolerate := func(ts ...corev1.Toleration) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = ts }
	}
	selectPool := func(pool string) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": pool} }
	}
	dss = []appsv1.DaemonSet{
		named("tolerant"),
		named("cilium", tolerate()),
		named("istio-cni-node", tolerate()),
		named("csi-plugin", tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
		named("general-only", selectPool("general")),
		named("gpu-only", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.present": "true"}
		}),
		named("not-running-yet", tolerate()),
	}
	withPod = []string{"tolerant", "cilium", "istio-cni-node", "csi-plugin", "general-only"}
	for k := range 10 {
		var ts []corev1.Toleration
		for j := range 10 {
			if j != k {
				ts = append(ts, corev1.Toleration{Key: fmt.Sprintf("dedicated-%d", j), Operator: corev1.TolerationOpExists})
			}
		}
		name := fmt.Sprintf("agent-%02d", k)
		dss = append(dss, named(name, tolerate(ts...)))
		withPod = append(withPod, name)
	}
	return dss, withPod
}

// fuzzNodePolicy denies the loss of two agents, so that the fuzzer sees
// denials beside warnings.
const fuzzNodePolicy = `apiVersion: dsguard.io/v1alpha1
kind: PolicyConfig
rules:
  node-change:
    action: deny
    parameters:
      critical: [monitoring/cilium, monitoring/agent-03]
`

// fuzzDaemonSetName finds the DaemonSets an answer names.
var fuzzDaemonSetName = regexp.MustCompile(`monitoring/[a-z0-9-]+`)

// FuzzNodeChangeReview feeds NodeChangeHandler.Handle arbitrary old and new
// Node objects (as the API server would send them, or garbled) against a
// fixed set of DaemonSets, under the default policy and one that denies.
// Whatever the input: no panic (the handler's recovery answers "internal
// error in dsguard"); a well-formed answer (an error has its code and
// message and no warnings, a deny is a 403 saying which node, warnings are
// one line each within the API server's limit, rule ID first, at most
// maxNodeChangeLines of them); only DaemonSets of the cluster are named; a
// change that leaves taints and labels alone is allowed silently; and the
// same request gets the same answer.
func FuzzNodeChangeReview(f *testing.F) {
	dss, withPod := fuzzNodeAgents()
	known := map[string]bool{}
	for _, ds := range dss {
		known[ds.Namespace+"/"+ds.Name] = true
	}
	var decoder admission.Decoder
	handler := func(policyYAML string) *NodeChangeHandler {
		scheme, src, m := testServing(f, policyYAML)
		decoder = admission.NewDecoder(scheme)
		h := NewNodeChangeHandler(scheme, src, m)
		list := make([]*appsv1.DaemonSet, len(dss))
		for i := range dss {
			list[i] = &dss[i]
		}
		h.DaemonSets = func(context.Context) ([]*appsv1.DaemonSet, error) { return list, nil }
		h.PodsOnNode = func(_ context.Context, node string) ([]metav1.PartialObjectMetadata, error) {
			out := make([]metav1.PartialObjectMetadata, 0, len(withPod))
			for _, name := range withPod {
				out = append(out, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
					Name: name + "-" + node, Namespace: "monitoring",
					OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: name, Controller: new(true)}},
				}})
			}
			return out, nil
		}
		h.Now = func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }
		return h
	}
	handlers := []*NodeChangeHandler{handler(""), handler(fuzzNodePolicy)}

	node := func(name string, labels map[string]string, taints ...corev1.Taint) []byte {
		n := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, ResourceVersion: "4711"},
			Spec:       corev1.NodeSpec{Taints: taints}}
		data, err := json.Marshal(n)
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	worker := map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": "infra-4", "pool": "general"}
	relabelled := map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": "infra-4", "pool": "infra"}
	noSchedule := func(key, value string) corev1.Taint {
		return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule}
	}
	var manyTaints []corev1.Taint
	for k := range 10 {
		manyTaints = append(manyTaints, noSchedule(fmt.Sprintf("dedicated-%d", k), ""))
	}
	plain := node("infra-4", worker)
	for _, seed := range [][2][]byte{
		{plain, node("infra-4", worker, noSchedule("dedicated", "infra"))},
		{plain, node("infra-4", worker, corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute})},
		{plain, node("infra-4", worker, corev1.Taint{Key: "example.com/spot", Effect: corev1.TaintEffectPreferNoSchedule})},
		{node("infra-4", worker, noSchedule("dedicated", "infra")), plain},
		{plain, node("infra-4", relabelled)},
		{plain, node("infra-4", map[string]string{"kubernetes.io/os": "linux"})},
		{plain, node("infra-4", worker, manyTaints...)},
		{plain, node("infra-4", worker, noSchedule("node.kubernetes.io/unschedulable", ""))},
		{plain, plain},
		{plain, []byte(`{"spec":{"taints":"nope"}}`)},
		{[]byte(`{}`), []byte(`{"metadata":{"labels":{"pool":"gpu"}}}`)},
	} {
		f.Add(seed[0], seed[1], false)
		f.Add(seed[0], seed[1], true)
	}
	f.Fuzz(func(t *testing.T, before, after []byte, deny bool) {
		h := handlers[0]
		if deny {
			h = handlers[1]
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID:       "4f0a1c3e-0000-4000-8000-000000000002",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
			Name:      "infra-4",
			Operation: admissionv1.Update,
			UserInfo:  authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}},
			Object:    runtime.RawExtension{Raw: after},
			OldObject: runtime.RawExtension{Raw: before},
		}}
		ctx := fromAPIServer(t.Context())
		resp := h.Handle(ctx, req)
		if again := h.Handle(ctx, req); !reflect.DeepEqual(resp, again) {
			t.Fatalf("the same request answered twice differently:\n%+v\n%+v", resp, again)
		}
		text := strings.Join(resp.Warnings, "\n")
		if resp.Result != nil {
			text += "\n" + resp.Result.Message
		}
		if strings.Contains(text, "internal error in dsguard") {
			t.Fatalf("the handler panicked: %s", text)
		}
		if !resp.Allowed {
			if resp.Result == nil || resp.Result.Message == "" {
				t.Fatalf("refused without a reason: %+v", resp)
			}
			switch code := resp.Result.Code; code {
			case http.StatusForbidden:
				if !strings.HasPrefix(resp.Result.Message, "this change to node ") {
					t.Fatalf("a deny that does not say which node: %q", resp.Result.Message)
				}
			case http.StatusBadRequest, http.StatusServiceUnavailable:
				if len(resp.Warnings) > 0 {
					t.Fatalf("an error (%d) with warnings: %q", code, resp.Warnings)
				}
			default:
				t.Fatalf("refused with code %d: %s", code, resp.Result.Message)
			}
		}
		if len(resp.Warnings) > maxNodeChangeLines {
			t.Fatalf("%d warnings, over the cap of %d:\n%s", len(resp.Warnings), maxNodeChangeLines, text)
		}
		for i, w := range resp.Warnings {
			if len(w) > maxWarningLen || strings.ContainsAny(w, "\r\n") {
				t.Fatalf("warning %d of %d characters (limit %d) or on two lines: %q", i, len(w), maxWarningLen, w)
			}
			// The line that counts the groups left out, or one saying the
			// change was not judged.
			last := (i == maxNodeChangeLines-1 || i == len(resp.Warnings)-1) && strings.HasPrefix(w, "dsguard: ")
			if !strings.HasPrefix(w, "node-change: ") && !last {
				t.Fatalf("warning %d does not start with the rule ID: %q", i, w)
			}
		}
		for _, name := range fuzzDaemonSetName.FindAllString(text, -1) {
			if !known[name] {
				t.Fatalf("the answer names %s, no DaemonSet of the cluster: %s", name, text)
			}
		}
		var old, updated corev1.Node
		if decoder.DecodeRaw(req.OldObject, &old) == nil && decoder.DecodeRaw(req.Object, &updated) == nil &&
			reflect.DeepEqual(old.Spec.Taints, updated.Spec.Taints) && maps.Equal(old.Labels, updated.Labels) &&
			(!resp.Allowed || len(resp.Warnings) > 0) {
			t.Fatalf("neither taints nor labels change, yet allowed %v with warnings %q: %+v", resp.Allowed, resp.Warnings, resp.Result)
		}
	})
}
