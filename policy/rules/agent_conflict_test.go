package rules

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

// withHostPort gives the agent container a host port.
func withHostPort(port int32) func(*appsv1.DaemonSet) {
	return testobj.WithAgent(func(c *corev1.Container) {
		c.Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}
	})
}

// named renames a DaemonSet (and its labels) to namespace/name.
func named(ns, name string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Namespace, ds.Name = ns, name
		l := map[string]string{"app": name}
		ds.Labels, ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels = l, l, l
	}
}

// avoiding gives the template a required anti-affinity term selecting app
// in namespace ns.
func avoiding(app, ns, topologyKey string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: topologyKey,
				Namespaces: []string{ns}, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
	}
}

func TestAgentConflicts(t *testing.T) {
	// Four workers; the logging agent binds 9100 on the first two only, a
	// web Pod holds 8080 on worker-3, the agent's own old Pod 9300 on
	// worker-4.
	nodes := []*corev1.Node{fitNode("worker-1"), fitNode("worker-2"), fitNode("worker-3"), fitNode("worker-4")}
	logging := testobj.DS(named("logging", "log-agent"), withHostPort(9100),
		testobj.WithNodeSelector(map[string]string{"pool": "a"}))
	for _, n := range nodes[:2] {
		n.Labels["pool"] = "a"
	}
	web := fitPod("apps", "web-0", "worker-3", "100m", "64Mi", "")
	web.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	web.Labels = map[string]string{"app": "web"}
	own := fitPod("monitoring", "agent-old", "worker-4", "100m", "64Mi", "agent")
	own.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9300, HostPort: 9300}}
	snap := coverage.NewNodeSnapshot(nodes)
	cluster := fitCluster(t, nodes, web, own)
	for _, tc := range []struct {
		name   string
		rule   string
		ds     *appsv1.DaemonSet
		hide   bool
		noList bool
		want   []wantFinding
	}{
		{name: "no host port", rule: hostPortConflictID, ds: testobj.DS()},
		{name: "a free port", rule: hostPortConflictID, ds: testobj.DS(withHostPort(9200))},
		{name: "its own old Pod's port makes way", rule: hostPortConflictID, ds: testobj.DS(withHostPort(9300))},
		{name: "without the other DaemonSets the rule does not run", rule: hostPortConflictID,
			ds: testobj.DS(withHostPort(9100)), noList: true},
		{
			name: "another agent's port on some nodes warns", rule: hostPortConflictID, ds: testobj.DS(withHostPort(9100)),
			want: []wantFinding{{field: "spec.template.spec", action: policy.ActionWarn,
				prefix: "stays Pending on 2 of 4 nodes it covers: DaemonSet logging/log-agent holds host port 9100/TCP on 2 nodes (worker-1, worker-2)"}},
		},
		{
			name: "node names hidden", rule: hostPortConflictID, ds: testobj.DS(withHostPort(8080)), hide: true,
			want: []wantFinding{{field: "spec.template.spec", action: policy.ActionWarn,
				prefix: "stays Pending on 1 of 4 nodes it covers: 1 Pod holds host port 8080/TCP on 1 node", absent: []string{"worker-", "web-0"}}},
		},
		{
			name: "every covered node taken denies", rule: hostPortConflictID,
			ds: testobj.DS(withHostPort(9100), testobj.WithNodeSelector(map[string]string{"pool": "a"})),
			want: []wantFinding{{field: "spec.template.spec", action: policy.ActionDeny,
				prefix: "stays Pending on every node it covers (2): DaemonSet logging/log-agent holds host port 9100/TCP"}},
		},
		{name: "anti-affinity selecting nothing", rule: antiAffinityConflictID,
			ds: testobj.DS(avoiding("cache", "apps", corev1.LabelHostname))},
		{
			name: "anti-affinity against the other agent", rule: antiAffinityConflictID,
			ds: testobj.DS(avoiding("log-agent", "logging", corev1.LabelHostname)),
			want: []wantFinding{{field: "spec.template.spec.affinity.podAntiAffinity", action: policy.ActionWarn,
				prefix: "stays Pending on 2 of 4 nodes it covers: DaemonSet logging/log-agent repels it by anti-affinity " +
					"(topologyKey kubernetes.io/hostname) on 2 nodes (worker-1, worker-2)"}},
		},
		{
			// The term is the other agent's: it works both ways.
			name: "the other agent's anti-affinity selects it", rule: antiAffinityConflictID,
			ds: testobj.DS(named("monitoring", "web")),
			want: []wantFinding{{field: "spec.template.spec.affinity.podAntiAffinity", action: policy.ActionWarn,
				prefix: "stays Pending on 2 of 4 nodes it covers: DaemonSet logging/avoider repels it"}},
		},
		{
			name: "a bound Pod it avoids", rule: antiAffinityConflictID,
			ds: testobj.DS(avoiding("web", "apps", corev1.LabelHostname)),
			want: []wantFinding{{field: "spec.template.spec.affinity.podAntiAffinity", action: policy.ActionWarn,
				prefix: "stays Pending on 1 of 4 nodes it covers: Pod apps/web-0 repels it by anti-affinity (topologyKey kubernetes.io/hostname) on 1 node (worker-3)"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := nodeEnv(snap)
			env.HideNodeNames = tc.hide
			env.Fit = cluster
			avoider := testobj.DS(named("logging", "avoider"), avoiding("web", "monitoring", corev1.LabelHostname),
				testobj.WithNodeSelector(map[string]string{"pool": "a"}))
			if !tc.noList {
				env.DaemonSets = func() []*appsv1.DaemonSet { return []*appsv1.DaemonSet{logging, avoider, tc.ds} }
			}
			assertFindings(t, findingsOf(policy.Evaluate(tc.ds, *env), tc.rule), tc.want)
		})
	}
}

// TestAgentConflicts_NamesTheOthersInOneOrder: the DaemonSet cache lists in
// no fixed order; the message must not follow it.
func TestAgentConflicts_NamesTheOthersInOneOrder(t *testing.T) {
	nodes := []*corev1.Node{fitNode("worker-1"), fitNode("worker-2")}
	snap := coverage.NewNodeSnapshot(nodes)
	rivals := []*appsv1.DaemonSet{
		testobj.DS(named("logging", "log-agent"), withHostPort(9100)),
		testobj.DS(named("alerting", "probe"), withHostPort(9100)),
		testobj.DS(named("logging", "audit-agent"), withHostPort(9100)),
	}
	ds := testobj.DS(withHostPort(9100))
	var first string
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}} {
		env := nodeEnv(snap)
		env.Fit = fitCluster(t, nodes)
		listed := []*appsv1.DaemonSet{ds}
		for _, i := range order {
			listed = append(listed, rivals[i])
		}
		env.DaemonSets = func() []*appsv1.DaemonSet { return listed }
		found := findingsOf(policy.Evaluate(ds, *env), hostPortConflictID)
		if len(found) != 1 {
			t.Fatalf("order %v: want one finding, got %v", order, found)
		}
		if first == "" {
			first = found[0].Message
			want := "DaemonSet alerting/probe holds host port 9100/TCP on 2 nodes (worker-1, worker-2); " +
				"DaemonSet logging/audit-agent holds host port 9100/TCP on 2 nodes (worker-1, worker-2); " +
				"DaemonSet logging/log-agent holds"
			if !strings.Contains(first, want) {
				t.Fatalf("the others are not named by namespace and name:\n%s\nwant it to contain\n%s", first, want)
			}
		} else if found[0].Message != first {
			t.Errorf("order %v changed the message:\n%s\nfirst:\n%s", order, found[0].Message, first)
		}
	}
}
