package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/policy/rules"
)

// TestLint_StrictWithBothHelms runs `helm lint --strict` with Helm 3 and
// Helm 4 for every value set: no warning, and the values meet the schema.
func TestLint_StrictWithBothHelms(t *testing.T) {
	e := setup(t)
	for _, h := range e.helms() {
		for _, c := range cases {
			t.Run(h.name+"/"+c.name, func(t *testing.T) {
				args := append([]string{"lint", "--strict", "charts/dsguard", "--namespace", namespace}, c.args()...)
				r := e.run(h.path, args...)
				if r.err != nil || !strings.Contains(r.stdout, "0 chart(s) failed") {
					t.Fatalf("lint failed: %v\n%s", r.err, r)
				}
			})
		}
	}
}

// TestTemplate_Golden compares `helm template` with the golden files, for
// both Helm versions (which must render the same objects). -update rewrites
// the golden files from Helm 3.
func TestTemplate_Golden(t *testing.T) {
	e := setup(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			golden := filepath.Join("testdata", "golden", c.name+".yaml")
			hs := e.helms()
			if *update {
				got := e.template(t, hs[0], c.args()...)
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			for _, h := range hs {
				if got := e.template(t, h, c.args()...); got != string(want) {
					t.Errorf("%s renders differently from %s (run with -update if intended):\n%s",
						h.name, golden, firstDifference(string(want), got))
				}
			}
		})
	}
}

// firstDifference shows the first differing line with a little context.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			from := max(0, i-3)
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\ncontext (got):\n" +
				strings.Join(g[from:min(len(g), i+3)], "\n")
		}
	}
	return "(no difference)"
}

// TestTemplate_DeploymentArgsAreServeFlags fails when the chart passes a flag
// that `dsguard serve` does not have, for every value set.
func TestTemplate_DeploymentArgsAreServeFlags(t *testing.T) {
	e := setup(t)
	bin := e.dsguard(t)
	flags := e.flags(t, bin, "serve")
	if !flags["cert-dir"] || !flags["leader-elect"] {
		t.Fatalf("could not read the flags of dsguard serve --help: %v", flags)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := objects(t, e.template(t, e.helms()[0], c.args()...))
			deploy := find(objs, "Deployment")
			if len(deploy) != 1 {
				t.Fatalf("%d Deployments rendered, want 1", len(deploy))
			}
			args, _ := get(deploy[0], "spec", "template", "spec", "containers", 0, "args").([]any)
			if len(args) == 0 || args[0] != "serve" {
				t.Fatalf("args = %v, want serve first", args)
			}
			for _, a := range args[1:] {
				s, _ := a.(string)
				name, _, _ := strings.Cut(strings.TrimPrefix(s, "--"), "=")
				if !strings.HasPrefix(s, "--") || !flags[name] {
					t.Errorf("argument %q is not a flag of dsguard serve", s)
				}
			}
		})
	}
}

// TestTemplate_Defaults checks what the issue asks of the default install,
// so that regenerating the golden files cannot silently drop it.
func TestTemplate_Defaults(t *testing.T) {
	e := setup(t)
	objs := objects(t, e.template(t, e.helms()[0]))

	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o["kind"].(string)]++
	}
	// Hooks: the pre-delete Job and the helm test Pod, each with its own
	// ServiceAccount and RBAC.
	for kind, n := range map[string]int{
		"Deployment": 1, "PodDisruptionBudget": 1, "Service": 1, "ServiceAccount": 3, "ClusterRole": 4,
		"ClusterRoleBinding": 2, "Role": 2, "RoleBinding": 2, "ConfigMap": 2, "ValidatingWebhookConfiguration": 1,
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1, "Job": 1, "Pod": 1,
		"ServiceMonitor": 0, "PrometheusRule": 0, "NetworkPolicy": 1,
	} {
		if kinds[kind] != n {
			t.Errorf("%d %s rendered, want %d", kinds[kind], kind, n)
		}
	}

	d := find(objs, "Deployment")[0]
	pod := get(d, "spec", "template", "spec")
	ctr := get(pod, "containers", 0)
	for _, c := range []struct {
		path []any
		want any
	}{
		{[]any{"spec", "replicas"}, 2.0},
		{[]any{"spec", "template", "spec", "securityContext", "runAsNonRoot"}, true},
		{[]any{"spec", "template", "spec", "securityContext", "seccompProfile", "type"}, "RuntimeDefault"},
		{[]any{"spec", "template", "spec", "serviceAccountName"}, "dsguard"},
		{[]any{"spec", "template", "spec", "priorityClassName"}, "system-cluster-critical"},
		{[]any{"spec", "template", "spec", "securityContext", "fsGroup"}, 65532.0},
		{[]any{"spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution", 0,
			"podAffinityTerm", "topologyKey"}, "kubernetes.io/hostname"},
		// Preferences only: two replicas still run on a one-node cluster.
		{[]any{"spec", "template", "spec", "topologySpreadConstraints", 0, "topologyKey"}, "kubernetes.io/hostname"},
		{[]any{"spec", "template", "spec", "topologySpreadConstraints", 0, "whenUnsatisfiable"}, "ScheduleAnyway"},
		{[]any{"spec", "template", "spec", "topologySpreadConstraints", 0, "labelSelector", "matchLabels", "app.kubernetes.io/instance"}, "dsguard"},
		{[]any{"spec", "template", "spec", "topologySpreadConstraints", 1, "topologyKey"}, "topology.kubernetes.io/zone"},
		{[]any{"spec", "template", "spec", "topologySpreadConstraints", 1, "whenUnsatisfiable"}, "ScheduleAnyway"},
		{[]any{"spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"}, nil},
	} {
		if got := get(d, c.path...); got != c.want {
			t.Errorf("Deployment %v = %v, want %v", c.path, got, c.want)
		}
	}
	for _, c := range []struct {
		path []any
		want any
	}{
		{[]any{"securityContext", "runAsNonRoot"}, true},
		{[]any{"securityContext", "readOnlyRootFilesystem"}, true},
		{[]any{"securityContext", "allowPrivilegeEscalation"}, false},
		{[]any{"securityContext", "capabilities", "drop", 0}, "ALL"},
		{[]any{"securityContext", "seccompProfile", "type"}, "RuntimeDefault"},
		{[]any{"readinessProbe", "httpGet", "path"}, "/readyz"},
		{[]any{"readinessProbe", "httpGet", "port"}, "health"},
		{[]any{"livenessProbe", "httpGet", "path"}, "/healthz"},
		{[]any{"livenessProbe", "httpGet", "port"}, "health"},
		{[]any{"env", 0, "name"}, "POD_NAMESPACE"},
		{[]any{"env", 0, "valueFrom", "fieldRef", "fieldPath"}, "metadata.namespace"},
		{[]any{"resources", "requests", "cpu"}, "50m"},
		{[]any{"resources", "limits", "memory"}, "256Mi"},
	} {
		if got := get(ctr, c.path...); got != c.want {
			t.Errorf("container %v = %v, want %v", c.path, got, c.want)
		}
	}
	ports := map[string]float64{}
	for _, p := range get(ctr, "ports").([]any) {
		ports[get(p, "name").(string)] = get(p, "containerPort").(float64)
	}
	if ports["webhook"] != 9443 || ports["health"] != 8081 || ports["metrics"] != 8443 {
		t.Errorf("container ports = %v, want webhook 9443, health 8081, metrics 8443", ports)
	}
	var args []string
	for _, a := range get(ctr, "args").([]any) {
		args = append(args, a.(string))
	}
	for _, want := range []string{"--namespace=$(POD_NAMESPACE)", "--leader-elect=true", "--port=9443",
		"--health-probe-bind-address=:8081", "--metrics-bind-address=:8443", "--metrics-secure=true",
		"--cert-mode=self-managed", "--ca-secret=dsguard-ca", "--webhook-config-name=dsguard",
		"--cert-dns-names=dsguard.dsguard-system.svc,dsguard.dsguard-system.svc.cluster.local"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	// Self-managed certificates need no Secret mounted: nothing to create first.
	if got := get(pod, "volumes"); got != nil {
		t.Errorf("volumes = %v, want none (the CA lives in a Secret dsguard reads through the API)", got)
	}

	if got := get(find(objs, "PodDisruptionBudget")[0], "spec", "minAvailable"); got != 1.0 {
		t.Errorf("PodDisruptionBudget minAvailable = %v, want 1", got)
	}
	svcPorts := map[float64]any{}
	for _, p := range get(find(objs, "Service")[0], "spec", "ports").([]any) {
		svcPorts[get(p, "port").(float64)] = get(p, "targetPort")
	}
	if svcPorts[443] != "webhook" || svcPorts[8443] != "metrics" {
		t.Errorf("Service ports = %v, want 443 → webhook and 8443 → metrics", svcPorts)
	}

	vwc := find(objs, "ValidatingWebhookConfiguration")[0]
	hooks := get(vwc, "webhooks").([]any)
	wantHooks := []struct {
		name, failurePolicy string
		timeout             float64
	}{
		{"daemonsets.dsguard.io", "Fail", 5}, {"infrastructure.daemonsets.dsguard.io", "Ignore", 5}, {"policy.dsguard.io", "Ignore", 5},
		// Node updates: fails open with a short timeout, never blocking a node.
		{"nodes.dsguard.io", "Ignore", 2},
	}
	if len(hooks) != len(wantHooks) {
		t.Fatalf("%d webhooks, want %d", len(hooks), len(wantHooks))
	}
	for i, w := range wantHooks {
		h := hooks[i]
		if get(h, "name") != w.name || get(h, "failurePolicy") != w.failurePolicy ||
			get(h, "matchPolicy") != "Equivalent" || get(h, "sideEffects") != "None" || get(h, "timeoutSeconds") != w.timeout {
			t.Errorf("webhook %d = %v, want %s with failurePolicy %s, matchPolicy Equivalent, sideEffects None, timeout %v",
				i, h, w.name, w.failurePolicy, w.timeout)
		}
		if get(h, "clientConfig", "service", "name") != "dsguard" || get(h, "clientConfig", "service", "port") != 443.0 {
			t.Errorf("webhook %s clientConfig = %v, want the Service dsguard:443", w.name, get(h, "clientConfig"))
		}
	}
	excluded := get(hooks[0], "namespaceSelector", "matchExpressions", 0, "values").([]any)
	failOpen := get(hooks[1], "namespaceSelector", "matchExpressions", 0, "values").([]any)
	if !slices.Contains(excluded, any("kube-system")) || !slices.Contains(failOpen, any("kube-system")) {
		t.Errorf("kube-system: want it excluded from daemonsets.dsguard.io (%v) and in the fail-open entry (%v)", excluded, failOpen)
	}
	// Rendered without a cluster, no well-known CNI namespace is known to
	// exist: none fails open, since a tenant could create it.
	for _, ns := range []string{"calico-system", "tigera-operator", "kube-flannel", "cilium"} {
		if slices.Contains(excluded, any(ns)) || slices.Contains(failOpen, any(ns)) {
			t.Errorf("%s: rendered without a cluster, want it judged by daemonsets.dsguard.io (%v) and not in the fail-open entry (%v)", ns, excluded, failOpen)
		}
	}
	if !slices.Contains(excluded, any(namespace)) || slices.Contains(failOpen, any(namespace)) {
		t.Errorf("daemonsets.dsguard.io excludes %v, want %s among them and not in the fail-open entry", excluded, namespace)
	}
	ops := get(hooks[2], "rules", 0, "operations").([]any)
	if !slices.Contains(ops, any("DELETE")) {
		t.Errorf("policy.dsguard.io matches %v, want DELETE too (a deleted policy is warned about)", ops)
	}
}

// TestTemplate_PolicyParsesInDsguard feeds the policy ConfigMap each value
// set renders to dsguard's own strict parser.
func TestTemplate_PolicyParsesInDsguard(t *testing.T) {
	e := setup(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := objects(t, e.template(t, e.helms()[0], c.args()...))
			// The policy is the ConfigMap with the label; another may hold
			// the client CA bundle.
			var cms []object
			for _, cm := range find(objs, "ConfigMap") {
				if get(cm, "metadata", "labels", "dsguard.io/policy") == "true" {
					cms = append(cms, cm)
				}
			}
			if len(cms) != 1 || get(cms[0], "metadata", "name") != "dsguard-policy" {
				t.Fatalf("want one ConfigMap dsguard-policy labelled dsguard.io/policy=true, got %v", cms)
			}
			doc, _ := get(cms[0], "data", "policy.yaml").(string)
			if _, err := rules.Builtin().ParseConfig([]byte(doc)); err != nil {
				t.Errorf("the rendered policy is refused by dsguard: %v\n%s", err, doc)
			}
		})
	}
}

// TestTemplate_OptionalObjects checks what the non-default value sets switch
// on and off.
func TestTemplate_OptionalObjects(t *testing.T) {
	e := setup(t)
	h := e.helms()[0]

	mon := objects(t, e.template(t, h, valueCase{values: "fail-open-monitored.yaml"}.args()...))
	if len(find(mon, "ServiceMonitor")) != 1 || len(find(mon, "PrometheusRule")) != 1 || len(find(mon, "NetworkPolicy")) != 1 {
		t.Error("fail-open-monitored: want a ServiceMonitor, a PrometheusRule and a NetworkPolicy")
	}
	hooks := get(find(mon, "ValidatingWebhookConfiguration")[0], "webhooks").([]any)
	if get(hooks[0], "failurePolicy") != "Ignore" || get(hooks[0], "timeoutSeconds") != 3.0 {
		t.Errorf("fail-open-monitored: daemonsets.dsguard.io = %v, want failurePolicy Ignore, timeout 3", hooks[0])
	}
	excluded := get(hooks[0], "namespaceSelector", "matchExpressions", 0, "values").([]any)
	for _, ns := range []string{namespace, "kube-system", "monitoring", "logging"} {
		if !slices.Contains(excluded, any(ns)) {
			t.Errorf("fail-open-monitored: %s is not excluded: %v", ns, excluded)
		}
	}

	url := objects(t, e.template(t, h, valueCase{values: "webhook-url.yaml"}.args()...))
	for _, hook := range get(find(url, "ValidatingWebhookConfiguration")[0], "webhooks").([]any) {
		u, _ := get(hook, "clientConfig", "url").(string)
		if !strings.HasPrefix(u, "https://dsguard.example.com:9443/validate-") || get(hook, "clientConfig", "service") != nil ||
			get(hook, "clientConfig", "caBundle") == nil {
			t.Errorf("webhook-url: clientConfig = %v, want the URL and the caBundle, no Service", get(hook, "clientConfig"))
		}
	}

	single := objects(t, e.template(t, h, valueCase{values: "single-replica.yaml"}.args()...))
	for _, kind := range []string{"PodDisruptionBudget", "ServiceAccount", "ServiceMonitor", "PrometheusRule"} {
		if n := len(find(single, kind)); n != 0 {
			t.Errorf("single-replica: %d %s rendered, want none", n, kind)
		}
	}
	if n := len(find(single, "ClusterRole")); n != 2 {
		t.Errorf("single-replica: %d ClusterRoles, want 2, dsguard's and the exemption granter's (no metrics reader without metrics)", n)
	}
	for _, b := range append(find(single, "RoleBinding"), find(single, "ClusterRoleBinding")...) {
		if get(b, "subjects", 0, "name") != "platform-dsguard" {
			t.Errorf("single-replica: %s binds %v, want the existing ServiceAccount platform-dsguard", b["kind"], get(b, "subjects"))
		}
	}
}
