package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// nodeChangeFixture is a node, the DaemonSets of the cluster and which of
// them run a Pod on the node.
type nodeChangeFixture struct {
	dss     []appsv1.DaemonSet
	withPod []string
}

func agent(name string, mutate ...func(*appsv1.DaemonSet)) appsv1.DaemonSet {
	ds := compliantDS(mutate...)
	ds.Name = name
	return *ds
}

func tolerating(ts ...corev1.Toleration) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = ts }
}

func selecting(key, value string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{key: value} }
}

func newNodeChangeHandler(t testing.TB, policyYAML string, f nodeChangeFixture) (*NodeChangeHandler, *Metrics) {
	t.Helper()
	scheme, src, m := testServing(t, policyYAML)
	h := NewNodeChangeHandler(scheme, src, m)
	dss := make([]*appsv1.DaemonSet, len(f.dss))
	for i := range f.dss {
		dss[i] = &f.dss[i]
	}
	h.DaemonSets = func(context.Context) ([]*appsv1.DaemonSet, error) { return dss, nil }
	h.PodsOnNode = func(_ context.Context, node string) ([]metav1.PartialObjectMetadata, error) {
		var out []metav1.PartialObjectMetadata
		for _, name := range f.withPod {
			out = append(out, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
				Name: name + "-" + node, Namespace: "monitoring",
				OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: name, Controller: new(true)}},
			}})
		}
		return out, nil
	}
	return h, m
}

// fromAPIServer is ctx of a request the server told came from the API
// server (here by its address, client authentication off).
func fromAPIServer(ctx context.Context) context.Context {
	return withCaller(ctx, caller{peer: peer{key: "10.0.0.1", trusted: true, byAddress: true}})
}

func workerNode(mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "infra-4", Labels: map[string]string{"kubernetes.io/os": "linux", "pool": "general"}},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func tainted(key, value string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func labelled(key, value string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[key] = value }
}

func nodeRequest(t *testing.T, op admissionv1.Operation, before, after *corev1.Node) admission.Request {
	req := request(t, op, after, before)
	req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Node"}
	req.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}
	req.Namespace, req.Name = "", before.Name
	return req
}

const denyNodeLosses = `apiVersion: dsguard.io/v1alpha1
kind: PolicyConfig
rules:
  node-change:
    action: deny
    parameters:
      critical: [monitoring/cil*]
`

func TestNodeChange_SaysWhichDaemonSetsLoseTheNode(t *testing.T) {
	noSchedule := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	cluster := nodeChangeFixture{
		dss: []appsv1.DaemonSet{
			agent("tolerant"), // tolerates everything
			agent("istio-cni-node", tolerating()),
			agent("ztunnel", tolerating()),
			agent("csi-plugin", tolerating(noSchedule)),
			agent("general-only", selecting("pool", "general")),
			agent("gpu-only", selecting("accelerator", "nvidia")),
			agent("not-running-yet", tolerating()),
			agent("cilium", tolerating()),
		},
		withPod: []string{"tolerant", "istio-cni-node", "ztunnel", "csi-plugin", "general-only", "cilium"},
	}
	cases := []struct {
		name     string
		policy   string
		after    *corev1.Node
		allowed  bool
		result   string
		warnings []string
		denial   []string
	}{{
		name:    "NoSchedule: running Pods stay until restarted, a Pod not yet made never comes",
		after:   workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoSchedule)),
		allowed: true, result: "warned",
		warnings: []string{
			"node-change: monitoring/cilium, monitoring/istio-cni-node, monitoring/ztunnel: taint dedicated=infra:NoSchedule not tolerated: its Pod keeps running until it is restarted, evicted or updated, then never comes back on infra-4",
			"node-change: monitoring/not-running-yet: taint dedicated=infra:NoSchedule not tolerated: no Pod will be made on infra-4",
		},
	}, {
		name:    "NoExecute: evicted now, also where the NoSchedule form is tolerated",
		after:   workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoExecute)),
		allowed: true, result: "warned",
		warnings: []string{
			"node-change: monitoring/cilium, monitoring/csi-plugin, monitoring/istio-cni-node, monitoring/ztunnel: taint dedicated=infra:NoExecute not tolerated: its Pod on infra-4 is evicted now",
			"node-change: monitoring/not-running-yet: taint dedicated=infra:NoExecute not tolerated: no Pod will be made on infra-4",
		},
	}, {
		name:    "a label the selector no longer matches deletes the Pod",
		after:   workerNode(labelled("pool", "infra")),
		allowed: true, result: "warned",
		warnings: []string{
			"node-change: monitoring/general-only: nodeSelector or node affinity does not match: its Pod on infra-4 is deleted now",
		},
	}, {
		name:    "a label nobody selects changes nothing",
		after:   workerNode(labelled("team", "platform")),
		allowed: true, result: "allowed",
	}, {
		name:    "a deny for the critical agents refuses the change and still warns for the rest",
		policy:  denyNodeLosses,
		after:   workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoSchedule)),
		allowed: false, result: "denied",
		warnings: []string{
			"node-change: monitoring/istio-cni-node, monitoring/ztunnel: taint dedicated=infra:NoSchedule not tolerated: its Pod keeps running until it is restarted, evicted or updated, then never comes back on infra-4",
			"node-change: monitoring/not-running-yet: taint dedicated=infra:NoSchedule not tolerated: no Pod will be made on infra-4",
		},
		denial: []string{"this change to node infra-4 takes agents away that the dsguard policy says no node may lose",
			"[node-change] monitoring/cilium: taint dedicated=infra:NoSchedule not tolerated", "fix: Give the agent a toleration"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, m := newNodeChangeHandler(t, tc.policy, cluster)
			resp := h.Handle(fromAPIServer(t.Context()), nodeRequest(t, admissionv1.Update, workerNode(), tc.after))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			if !slices.Equal(resp.Warnings, tc.warnings) {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(resp.Warnings, "\n"), strings.Join(tc.warnings, "\n"))
			}
			for _, w := range resp.Warnings {
				if len(w) > maxWarningLen {
					t.Errorf("warning of %d characters, over the API server's %d: %s", len(w), maxWarningLen, w)
				}
			}
			for _, part := range tc.denial {
				if !strings.Contains(resp.Result.Message, part) {
					t.Errorf("denial %q lacks %q", resp.Result.Message, part)
				}
			}
			if got := testutil.ToFloat64(m.NodeChangeDecisions.WithLabelValues(tc.result)); got != 1 {
				t.Errorf("dsguard_node_change_decisions_total{result=%q} = %v, want 1", tc.result, got)
			}
		})
	}
}

func TestNodeChange_AnswersWithoutJudging(t *testing.T) {
	cluster := nodeChangeFixture{dss: []appsv1.DaemonSet{agent("istio-cni-node", tolerating())}, withPod: []string{"istio-cni-node"}}
	taint := workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoExecute))
	bypass := "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nbypass:\n  users: [alice]\n"
	cases := []struct {
		name    string
		policy  string
		req     func(t *testing.T) admission.Request
		tweak   func(h *NodeChangeHandler)
		allowed bool
		code    int32
		result  string
	}{{
		name: "status only: neither taints nor labels change",
		req: func(t *testing.T) admission.Request {
			return nodeRequest(t, admissionv1.Update, workerNode(), workerNode())
		},
		allowed: true, result: "allowed",
	}, {
		name:    "bypassed user",
		policy:  bypass,
		req:     func(t *testing.T) admission.Request { return nodeRequest(t, admissionv1.Update, workerNode(), taint) },
		allowed: true, result: "bypassed",
	}, {
		name: "unauthenticated caller learns nothing",
		req:  func(t *testing.T) admission.Request { return nodeRequest(t, admissionv1.Update, workerNode(), taint) },
		tweak: func(h *NodeChangeHandler) {
			h.ClientAuth = true
		},
		allowed: true, result: "unauthenticated",
	}, {
		name:    "not an update",
		req:     func(t *testing.T) admission.Request { return nodeRequest(t, admissionv1.Create, workerNode(), taint) },
		allowed: true, result: "allowed",
	}, {
		name: "a DaemonSet in the wrong entry",
		req: func(t *testing.T) admission.Request {
			return request(t, admissionv1.Update, compliantDS(), compliantDS())
		},
		code: http.StatusBadRequest, result: "invalid",
	}, {
		name: "an unauthenticated caller's review of another kind counts as its own, not as dsguard's error",
		req: func(t *testing.T) admission.Request {
			return request(t, admissionv1.Update, compliantDS(), compliantDS())
		},
		tweak: func(h *NodeChangeHandler) {
			h.ClientAuth = true
		},
		allowed: true, result: "unauthenticated",
	}, {
		name: "DaemonSets cannot be listed: the entry fails open",
		req:  func(t *testing.T) admission.Request { return nodeRequest(t, admissionv1.Update, workerNode(), taint) },
		tweak: func(h *NodeChangeHandler) {
			h.DaemonSets = func(context.Context) ([]*appsv1.DaemonSet, error) { return nil, errors.New("cache not synced") }
		},
		code: http.StatusServiceUnavailable, result: "error",
	}, {
		name: "undecodable node",
		req: func(t *testing.T) admission.Request {
			r := nodeRequest(t, admissionv1.Update, workerNode(), taint)
			r.Object.Raw = []byte(`{"spec":{"taints":"nope"}}`)
			return r
		},
		code: http.StatusBadRequest, result: "invalid",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, m := newNodeChangeHandler(t, tc.policy, cluster)
			if tc.tweak != nil {
				tc.tweak(h)
			}
			ctx := fromAPIServer(t.Context())
			if h.ClientAuth {
				// Not through the server: a caller that did not authenticate.
				ctx = t.Context()
			}
			resp := h.Handle(ctx, tc.req(t))
			if resp.Allowed != tc.allowed || len(resp.Warnings) > 0 {
				t.Fatalf("allowed = %v with warnings %q, want allowed = %v and none: %+v", resp.Allowed, resp.Warnings, tc.allowed, resp.Result)
			}
			if tc.code != 0 && resp.Result.Code != tc.code {
				t.Errorf("code %d, want %d: %s", resp.Result.Code, tc.code, resp.Result.Message)
			}
			if got := testutil.ToFloat64(m.NodeChangeDecisions.WithLabelValues(tc.result)); got != 1 {
				t.Errorf("dsguard_node_change_decisions_total{result=%q} = %v, want 1", tc.result, got)
			}
		})
	}
}

// TestNodeChange_ManyDaemonSetsStayWithinTheWarningLimits: a node change
// that DaemonSets lose for more distinct reasons than the cap allows gives
// exactly maxNodeChangeLines lines, the last counting the groups left out;
// each line names as many DaemonSets as fit in maxWarningLen and counts the
// rest, so that no DaemonSet drops out of the answer unmentioned. Each
// DaemonSet lacks a toleration for one taint of its own group, so that the
// reasons differ: with one shared reason the lines never reach the cap.
// A change the policy denies for a critical agent warns within the same
// cap: kubectl shows the warnings of a refused request too, and the API
// server's budget for them is the same.
func TestNodeChange_ManyDaemonSetsStayWithinTheWarningLimits(t *testing.T) {
	const perGroup = 9
	// The cap exactly (no line counts groups), one over it, and well over.
	for _, groups := range []int{maxNodeChangeLines, maxNodeChangeLines + 1, 2 * maxNodeChangeLines} {
		for _, denied := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d groups, denied %v", groups, denied), func(t *testing.T) {
				manyGroupsWithinTheCap(t, groups, perGroup, denied)
			})
		}
	}
}

// manyGroupsWithinTheCap judges a change that groups DaemonSets lose, each
// group for a reason of its own; with denied, the policy also denies it for
// cilium, a critical agent that tolerates none of the taints.
func manyGroupsWithinTheCap(t *testing.T, groups, perGroup int, denied bool) {
	var f nodeChangeFixture
	policy := ""
	if denied {
		policy = denyNodeLosses
		f.dss = append(f.dss, agent("cilium", tolerating()))
		f.withPod = append(f.withPod, "cilium")
	}
	critical := len(f.dss) // denied, so on no warning line
	after := workerNode()
	for k := range groups {
		after.Spec.Taints = append(after.Spec.Taints, corev1.Taint{Key: fmt.Sprintf("dedicated-%d", k), Effect: corev1.TaintEffectNoSchedule})
	}
	members := make([][]string, groups)
	for i := range groups * perGroup {
		// Zero-padded: group k's first name sorts k-th, as the
		// lines are ordered.
		name := fmt.Sprintf("agent-%03d", i)
		var ts []corev1.Toleration
		for k := range groups {
			if k != i%groups {
				ts = append(ts, corev1.Toleration{Key: fmt.Sprintf("dedicated-%d", k), Operator: corev1.TolerationOpExists})
			}
		}
		f.dss = append(f.dss, agent(name, tolerating(ts...)))
		f.withPod = append(f.withPod, name)
		members[i%groups] = append(members[i%groups], "monitoring/"+name)
	}
	h, metrics := newNodeChangeHandler(t, policy, f)
	resp := h.Handle(fromAPIServer(t.Context()), nodeRequest(t, admissionv1.Update, workerNode(), after))
	want := min(groups, maxNodeChangeLines)
	if resp.Allowed == denied || len(resp.Warnings) != want {
		t.Fatalf("allowed %v with %d warnings, want allowed %v with exactly %d:\n%s",
			resp.Allowed, len(resp.Warnings), !denied, want, strings.Join(resp.Warnings, "\n"))
	}
	if denied && !strings.Contains(resp.Result.Message, "[node-change] monitoring/cilium: taint dedicated-0:NoSchedule not tolerated") {
		t.Errorf("the denial does not name cilium: %s", resp.Result.Message)
	}
	result := map[bool]string{false: "warned", true: "denied"}[denied]
	if got := testutil.ToFloat64(metrics.NodeChangeDecisions.WithLabelValues(result)); got != 1 {
		t.Errorf("dsguard_node_change_decisions_total{result=%q} = %v, want 1", result, got)
	}
	groupLines := resp.Warnings
	if groups > maxNodeChangeLines {
		groupLines = resp.Warnings[:maxNodeChangeLines-1]
		omitted := groups - len(groupLines)
		wantLast := fmt.Sprintf("dsguard: %d more groups of DaemonSets lose node infra-4; "+
			"run `kubectl dsguard taint` or `label` with the same change to see all", omitted)
		if last := resp.Warnings[maxNodeChangeLines-1]; last != wantLast {
			t.Errorf("last line:\n%s\nwant:\n%s", last, wantLast)
		}
	}
	total, accounted := 0, 0
	for _, w := range resp.Warnings {
		total += len(w)
		if len(w) > maxWarningLen || strings.HasSuffix(w, "...") {
			t.Errorf("warning cut or over %d characters (%d): %s", maxWarningLen, len(w), w)
		}
	}
	if total > warningBudget {
		t.Errorf("warnings total %d characters, over dsguard's budget of %d", total, warningBudget)
	}
	counted := regexp.MustCompile(`^(.+) and (\d+) more$`)
	for k, w := range groupLines {
		prefix := "node-change: "
		suffix := fmt.Sprintf(": taint dedicated-%d:NoSchedule not tolerated: its Pod keeps running until it is restarted, evicted or updated, then never comes back on infra-4", k)
		if !strings.HasPrefix(w, prefix) || !strings.HasSuffix(w, suffix) {
			t.Errorf("line %d is not group %d's (%q ... %q): %s", k, k, prefix, suffix, w)
			continue
		}
		list := strings.TrimSuffix(strings.TrimPrefix(w, prefix), suffix)
		named, rest := []string{list}, 0
		if m := counted.FindStringSubmatch(list); m != nil {
			named = strings.Split(m[1], ", ")
			rest, _ = strconv.Atoi(m[2])
		}
		if !slices.Equal(named, members[k][:min(len(named), len(members[k]))]) || len(named)+rest != len(members[k]) {
			t.Errorf("line %d names %q and counts %d more, want the first of %q and the rest counted", k, named, rest, members[k])
			continue
		}
		if rest == 0 {
			t.Errorf("line %d names all %d DaemonSets: the fixture no longer overflows a line", k, len(members[k]))
		} else if fuller := prefix + strings.Join(members[k][:len(named)+1], ", ") + andMore(rest-1) + suffix; len(fuller) <= maxWarningLen {
			t.Errorf("line %d counts %d DaemonSets although one more name fits (%d characters): %s", k, rest, len(fuller), w)
		}
		accounted += len(named) + rest
	}
	// The groups past the lines are those the last line counts.
	for _, m := range members[len(groupLines):] {
		accounted += len(m)
	}
	if accounted != len(f.dss)-critical {
		t.Errorf("%d of %d warned DaemonSets named or counted", accounted, len(f.dss)-critical)
	}
}

// TestNodeChange_ALineNoNameFitsCountsTheDaemonSets: when even one name
// would take a line past maxWarningLen, the line counts the DaemonSets
// instead of cutting the reason short or naming them cut off.
func TestNodeChange_ALineNoNameFitsCountsTheDaemonSets(t *testing.T) {
	var f nodeChangeFixture
	for _, c := range "ab" {
		name := strings.Repeat(string(c), maxWarningLen)
		f.dss = append(f.dss, agent(name, tolerating()))
		f.withPod = append(f.withPod, name)
	}
	h, _ := newNodeChangeHandler(t, "", f)
	resp := h.Handle(fromAPIServer(t.Context()), nodeRequest(t, admissionv1.Update, workerNode(), workerNode(tainted("dedicated", "infra", corev1.TaintEffectNoSchedule))))
	want := []string{"node-change: 2 DaemonSets: taint dedicated=infra:NoSchedule not tolerated: " +
		"its Pod keeps running until it is restarted, evicted or updated, then never comes back on infra-4"}
	if !resp.Allowed || !slices.Equal(resp.Warnings, want) {
		t.Errorf("allowed %v with warnings:\n%s\nwant allowed with:\n%s", resp.Allowed, strings.Join(resp.Warnings, "\n"), strings.Join(want, "\n"))
	}
}

// andMore is how a line counts the names it leaves out.
func andMore(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}
