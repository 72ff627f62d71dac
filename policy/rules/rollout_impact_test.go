package rules

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

func TestCheckRolloutImpact(t *testing.T) {
	const (
		muField    = "spec.updateStrategy.rollingUpdate.maxUnavailable"
		surgeField = "spec.updateStrategy.rollingUpdate.maxSurge"
	)
	// stored is the DaemonSet as the API server holds it, with the
	// controller's counts: 240 nodes should run it, 238 do.
	stored := func(mutators ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
		ds := testobj.DS(mutators...)
		ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 240, CurrentNumberScheduled: 238, NumberAvailable: 236}
		return ds
	}
	newImage := func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "example/agent:v1.2.4" }
	mu := func(v string) func(*appsv1.DaemonSet) { return testobj.WithRollingUpdate(testobj.IntOrString(v), nil) }
	surge := func(v *intstr.IntOrString) func(*appsv1.DaemonSet) {
		return testobj.WithRollingUpdate(testobj.IntOrInt(0), v)
	}
	probe := func(delay, threshold, period int32) func(*appsv1.DaemonSet) {
		return testobj.WithAgent(func(c *corev1.Container) {
			c.ReadinessProbe.InitialDelaySeconds = delay
			c.ReadinessProbe.SuccessThreshold = threshold
			c.ReadinessProbe.PeriodSeconds = period
		})
	}
	minReady := func(s int32) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = s }
	}
	unready := func(key string) func(*corev1.Node) {
		return testobj.NodeTaints(testobj.NoSchedule(key), testobj.NoExecute(key))
	}
	// live: 10 nodes, 3 of them down (one unreachable).
	live := snapshotOf(testobj.PoolNodes("ok", 7),
		testobj.Node("down-1", unready(corev1.TaintNodeNotReady)),
		testobj.Node("down-2", unready(corev1.TaintNodeNotReady)),
		testobj.Node("gone-1", unready(corev1.TaintNodeUnreachable)))

	liveWithPools := snapshotOf(testobj.PoolNodes("ok", 7, testobj.NodeLabels("pool", "ok")),
		testobj.Node("down-1", unready(corev1.TaintNodeNotReady)),
		testobj.Node("down-2", unready(corev1.TaintNodeNotReady)),
		testobj.Node("gone-1", unready(corev1.TaintNodeUnreachable)))

	tests := []struct {
		name     string
		old, new *appsv1.DaemonSet
		nodes    *coverage.NodeSnapshot
		observed *coverage.ReadyTimes
		caps     []NamespacePercent
		want     []wantFinding
	}{
		{name: "CREATE: nothing to compare", new: testobj.DS(newImage)},
		{name: "no Pod placed yet: nothing to replace", old: testobj.DS(), new: testobj.DS(newImage)},
		{name: "labels of the DaemonSet only", old: stored(),
			new: testobj.DS(func(ds *appsv1.DaemonSet) {
				ds.Labels = map[string]string{"app.kubernetes.io/name": "agent", "team": "infra"}
			})},
		{name: "the update strategy only", old: stored(), new: testobj.DS(mu("50%"))},
		{name: "minReadySeconds only", old: stored(), new: testobj.DS(minReady(30))},
		{name: "being deleted", old: stored(),
			new: testobj.DS(newImage, func(ds *appsv1.DaemonSet) { ds.DeletionTimestamp = &metav1.Time{Time: testobj.Now} })},
		{name: "image, maxUnavailable 1 by the stored counts", old: stored(), new: testobj.DS(newImage),
			want: []wantFinding{{field: muField, prefix: "this template change restarts the agent on 238 nodes, 1 at a time " +
				"(maxUnavailable 1 of 240 nodes, by status.desiredNumberScheduled)"}}},
		{name: "a template label is a template change", old: stored(),
			new:  testobj.DS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Labels["rev"] = "2" }),
			want: []wantFinding{{field: muField, msg: []string{"restarts the agent on 238 nodes"}}}},
		{name: "10% rounds up", old: stored(mu("10%")), new: testobj.DS(newImage, mu("10%")),
			want: []wantFinding{{field: muField, msg: []string{"238 nodes, 24 at a time", `maxUnavailable "10%" of 240 nodes`}}}},
		{name: "unset maxUnavailable is 1", old: stored(), new: testobj.DS(newImage, testobj.WithoutRollingUpdate),
			want: []wantFinding{{field: muField, msg: []string{"1 at a time (maxUnavailable 1 (the default) of 240"}}}},
		{name: "surge: no node goes without", old: stored(), new: testobj.DS(newImage, surge(testobj.IntOrString("25%"))),
			want: []wantFinding{{field: surgeField, msg: []string{"replaces the agent on 238 nodes, starting new Pods beside the old on 60 at a time",
				`maxSurge "25%" of 240 nodes`, "keeps its old Pod until the new one is available"}}}},
		{name: "OnDelete replaces nothing", old: stored(),
			new: testobj.DS(newImage, testobj.WithStrategyType(appsv1.OnDeleteDaemonSetStrategyType)),
			want: []wantFinding{{field: "spec.updateStrategy.type", prefix: "this template change restarts no Pod now (updateStrategy OnDelete): " +
				"the agent's 238 Pods stay on the old template"}}},
		{name: "a duration floor from the probe and minReadySeconds", old: stored(mu("10%")),
			new: testobj.DS(newImage, mu("10%"), probe(20, 3, 5), minReady(10)),
			want: []wantFinding{
				{field: muField, msg: []string{"24 at a time"}},
				// 20s delay + 2 more successes 5s apart + 10s: 40s a Pod, 10 rounds of 24 for 238 Pods.
				{field: "spec.template", prefix: "the rollout takes at least 6m40s: 10 rounds of at least 40s per Pod " +
					"(container agent's probes 30s + minReadySeconds 10)"}}},
		{name: "a blast-radius cap: 24 of 240 nodes at once is above 5 % in kube-system",
			old: stored(mu("10%")), new: testobj.DS(newImage, mu("10%"), func(ds *appsv1.DaemonSet) { ds.Namespace = "kube-system" }),
			caps: []NamespacePercent{{Namespaces: []string{"calico-*", "kube-system"}, Percent: 5, Action: policy.ActionDeny}},
			want: []wantFinding{
				{field: muField, msg: []string{"24 at a time"}},
				{field: muField, action: policy.ActionDeny, prefix: "this rollout leaves 24 of 240 nodes (10%) without the agent at once, " +
					"above the 5% the policy allows in namespace kube-system"}}},
		{name: "the cap of another namespace does not apply", old: stored(mu("10%")), new: testobj.DS(newImage, mu("10%")),
			caps: []NamespacePercent{{Namespaces: []string{"kube-system"}, Percent: 5}},
			want: []wantFinding{{field: muField, msg: []string{"24 at a time"}}}},
		{name: "a surge rollout leaves no node without the agent: no cap is passed", old: stored(),
			new:  testobj.DS(newImage, surge(testobj.IntOrString("25%"))),
			caps: []NamespacePercent{{Namespaces: []string{"*"}, Percent: 1}},
			want: []wantFinding{{field: surgeField, msg: []string{"60 at a time"}}}},
		{name: "a duration estimate from the Pods' observed time to Ready", old: stored(mu("10%")),
			new: testobj.DS(newImage, mu("10%"), probe(20, 3, 5), minReady(10)), observed: &coverage.ReadyTimes{Median: 47 * time.Second, Pods: 50},
			want: []wantFinding{
				{field: muField, msg: []string{"24 at a time"}},
				// 47s observed (above the probes' 30s) + 10s: 57s a Pod, 10 rounds.
				{field: "spec.template", prefix: "the rollout takes about 9m30s, an estimate: 10 rounds of about 57s per Pod " +
					"(the agent's Pods took a median 47s from creation to Ready, over 50 of them, + minReadySeconds 10)"}}},
		{name: "observed faster than the probes allow: the probes' floor holds", old: stored(mu("10%")),
			new: testobj.DS(newImage, mu("10%"), probe(20, 3, 5)), observed: &coverage.ReadyTimes{Median: 2 * time.Second, Pods: 3},
			want: []wantFinding{
				{field: muField, msg: []string{"24 at a time"}},
				{field: "spec.template", prefix: "the rollout takes about 5m0s, an estimate: 10 rounds of about 30s per Pod"}}},
		{name: "by the live nodes; down nodes hold part of the window", old: stored(mu("50%")), new: testobj.DS(newImage, mu("50%")), nodes: live,
			want: []wantFinding{
				{field: muField, msg: []string{"5 at a time", `maxUnavailable "50%" of 10 nodes, by the live nodes`}},
				{field: muField, prefix: "3 of the rollout's 5 nodes at a time are held for good by covered nodes that are NotReady or unreachable " +
					"(down-1, down-2, gone-1): it moves 2 at a time"}}},
		{name: "down nodes hold the whole window: a stall", old: stored(), new: testobj.DS(newImage), nodes: live,
			want: []wantFinding{
				{field: muField, msg: []string{"1 at a time"}},
				{field: muField, prefix: "the rollout will stall: 3 covered nodes are NotReady or unreachable (down-1, down-2, gone-1)",
					msg: []string{"holding all 1 of maxUnavailable"}}}},
		{name: "a surge slot held on each down node", old: stored(), new: testobj.DS(newImage, surge(testobj.IntOrInt(2))), nodes: live,
			want: []wantFinding{
				{field: surgeField, msg: []string{"2 at a time"}},
				{field: surgeField, prefix: "the rollout will stall", msg: []string{"holding all 2 of maxSurge"}}}},
		{name: "down nodes keep an agent that tolerates nothing: its Pods there still hold the window",
			old: stored(), new: testobj.DS(newImage, testobj.WithTolerations()), nodes: live,
			want: []wantFinding{
				// Not desired there (the not-ready NoSchedule taint), but the Pods stay.
				{field: muField, msg: []string{"(maxUnavailable 1 of 7 nodes, by the live nodes)"}},
				{field: muField, prefix: "the rollout will stall: 3 covered nodes are NotReady"}}},
		{name: "down nodes the agent does not select hold nothing", old: stored(),
			new: testobj.DS(newImage, testobj.WithNodeSelector(map[string]string{"pool": "ok"})), nodes: liveWithPools,
			want: []wantFinding{{field: muField, msg: []string{"(maxUnavailable 1 of 7 nodes, by the live nodes)"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testEnv()
			env.Nodes, env.Previous = tt.nodes, tt.old
			if tt.observed != nil {
				env.ReadyTimes = func() *coverage.ReadyTimes { return tt.observed }
			}
			got := checkRolloutImpact(tt.new, env, &RolloutImpactParams{MaxNodesAtOnce: tt.caps})
			assertFindings(t, got, tt.want)
			for _, f := range got {
				// A warning line is cut at 256 characters, rule ID first.
				if line := rolloutImpactID + ": " + f.Message; len(line) > 256 {
					t.Errorf("warning line of %d characters: %s", len(line), line)
				}
			}
		})
	}
}

// TestRolloutImpact_HidesNodeNames: an unauthenticated caller learns how
// many nodes are down, not which.
func TestRolloutImpact_HidesNodeNames(t *testing.T) {
	env := nodeEnv(snapshotOf(testobj.PoolNodes("ok", 3),
		testobj.Node("secret-1", testobj.NodeTaints(testobj.NoExecute(corev1.TaintNodeUnreachable)))))
	env.Previous, env.HideNodeNames = testobj.DS(), true
	env.Previous.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, CurrentNumberScheduled: 4}
	got := checkRolloutImpact(testobj.DS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "x:2" }), env, &RolloutImpactParams{})
	if len(got) != 2 || !strings.Contains(got[1].Message, "(1 node)") || strings.Contains(got[1].Message, "secret-1") {
		t.Fatalf("want the down node counted, not named:\n%s", describeFindings(got))
	}
}
