package vap

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/dsguard/dsguard/vap/vaptest"
)

// generatedSubjects is how many generated DaemonSets join the fixtures;
// raise it for a deeper comparison (400 ran clean: 21,888 verdicts).
var generatedSubjects = flag.Int("vap.generated", 60, "generated DaemonSets in the differential test")

// testDay is the day both sides judge exemption expiries against.
var testDay = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// testNamespaces are ordinary, kube-system, and names the test policies
// scope by name and glob.
var testNamespaces = []string{"fixtures", "kube-system", "team-a", "team-scratch", "legacy-app", "sandbox-1"}

// subject is a DaemonSet to judge, named for failure messages.
type subject struct {
	name string
	ds   *appsv1.DaemonSet
}

// subjects returns every rule fixture and n generated DaemonSets.
func subjects(t testing.TB, n int) []subject {
	t.Helper()
	files := fixtureFiles(t, "..")
	var out []subject
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ds := &appsv1.DaemonSet{}
		if err := yaml.UnmarshalStrict(data, ds); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, subject{strings.TrimPrefix(f, "../"), ds})
	}
	namesModelNode := false
	for _, ds := range vaptest.Generate(7, n) {
		out = append(out, subject{ds.Name, ds})
		namesModelNode = namesModelNode || ds.Spec.Template.Spec.NodeName == coverage.ModelNodeName
	}
	if n >= 60 && !namesModelNode {
		t.Errorf("no generated DaemonSet names the model node %q: vaptest's copy of the name is out of date", coverage.ModelNodeName)
	}
	return out
}

// fixtureFiles returns the rule fixtures (<rule>/{allowed,denied}/*.yaml)
// under the repository root, wherever the rules keep them.
func fixtureFiles(t testing.TB, root string) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"policy/rules/testdata/rules", "policy/testdata/rules"} {
		found, err := filepath.Glob(filepath.Join(root, dir, "*", "*", "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			// denied/expect.yaml names what each denied fixture must report.
			if filepath.Base(f) != "expect.yaml" {
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		t.Fatal("no rule fixtures found")
	}
	return files
}

// updates are the ways an UPDATE changes a stored DaemonSet.
var updates = map[string]func(*appsv1.DaemonSet){
	"labels": func(ds *appsv1.DaemonSet) { setKey(&ds.Labels, "dsguard.io/touched", "yes") },
	"template": func(ds *appsv1.DaemonSet) {
		setKey(&ds.Spec.Template.Annotations, "dsguard.io/revision", "2")
	},
	"new-container": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, corev1.Container{
			Name: "added", Image: "busybox:latest", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}})
	},
	"deleting": func(ds *appsv1.DaemonSet) {
		ds.DeletionTimestamp = &metav1.Time{Time: testDay}
		ds.Spec.Template.Spec.Containers[0].Image = "busybox:latest"
	},
	"exemption-added": func(ds *appsv1.DaemonSet) {
		setKey(&ds.Annotations, "exempt.dsguard.io/privileged", "")
	},
}

func setKey(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// TestRender_GivesTheWebhooksVerdicts evaluates the rendered policies with
// the API server's own admission code against every rule fixture and
// generated DaemonSets, created in several namespaces and updated several
// ways, and requires for each the verdict of dsguard's own DaemonSet handler
// (its UPDATE rules included: an unchanged spec, a deletion, ratcheting),
// under every test policy.
func TestRender_GivesTheWebhooksVerdicts(t *testing.T) {
	subs := subjects(t, *generatedSubjects)
	counts := map[string]int{}
	for name, cfg := range testPolicies(t) {
		t.Run(name, func(t *testing.T) {
			// The engine's copy leaves out the rules that are not rendered.
			for _, r := range rules.Builtin().Rules() {
				if !Renders(r.ID) {
					cfg.Rules.Options(r.ID).Action = policy.ActionOff
				}
			}
			p, err := policy.Compile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Render(cfg, Options{Namespace: "dsguard-system", Today: testDay})
			if err != nil {
				t.Fatal(err)
			}
			compiledPolicies := compileResult(t, res)
			h := webhookHandler(t, p, Options{Namespace: "dsguard-system"})
			check := func(what string, r request) {
				want, webhookMsgs := webhookVerdict(t, h, r)
				got, msgs := admit(t, compiledPolicies, r)
				counts[want]++
				if got != want {
					t.Errorf("%s: webhook %s %q, generated policies %s %q", what, want, webhookMsgs, got, msgs)
				}
				if got == "deny" && want == "deny" {
					sameContainers(t, what, webhookMsgs, msgs)
				}
			}
			for _, s := range subs {
				for _, ns := range testNamespaces {
					check("create "+ns+"/"+s.name, request{namespace: ns, object: s.ds})
				}
				for _, how := range slices.Sorted(mapsKeys(updates)) {
					changed := s.ds.DeepCopy()
					updates[how](changed)
					check("update "+how+" "+s.name, request{namespace: "fixtures", object: changed, old: s.ds})
				}
				check("create by break-glass "+s.name, request{namespace: "fixtures", object: s.ds, user: "break-glass"})
				// Stored under exemptions that have since expired: a
				// template change ratchets none of their findings.
				expired := s.ds.DeepCopy()
				for _, r := range rules.Builtin().Rules() {
					setKey(&expired.Annotations, policy.ExemptionAnnotationPrefix+r.ID, "legacy agent; expires=2000-01-01")
				}
				changed := expired.DeepCopy()
				updates["template"](changed)
				check("update template after exemptions expired "+s.name, request{namespace: "fixtures", object: changed, old: expired})
			}
		})
	}
	t.Logf("verdicts compared: %d deny, %d warn, %d allow", counts["deny"], counts["warn"], counts["allow"])
	for _, kind := range []string{"deny", "warn", "allow"} {
		if counts[kind] < 500 {
			t.Errorf("only %d %s verdicts: the subjects must exercise every outcome", counts[kind], kind)
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// containerFinding is the rule and container field a message starts with.
var containerFinding = regexp.MustCompile(`\[([a-z-]+)\] (spec\.template\.spec\.(?:initContainers|containers)\[\d+\][^:]*):`)

// sameContainers: a generated policy's deny that names a container names
// one the webhook's deny names for that rule, on an update too, where
// ratcheting denies what the update introduces, not what was already there.
func sameContainers(t *testing.T, what string, webhookMsgs, msgs []string) {
	t.Helper()
	named := map[string]bool{}
	for _, m := range webhookMsgs {
		for _, f := range containerFinding.FindAllStringSubmatch(m, -1) {
			named[f[1]+" "+f[2]] = true
		}
	}
	for _, m := range msgs {
		f := containerFinding.FindStringSubmatch(m)
		// The ratcheted twins' warnings name what was already there.
		if f == nil || strings.Contains(m, "(not denied on this update") || !strings.Contains(strings.Join(webhookMsgs, "\n"), "["+f[1]+"]") {
			continue
		}
		if !named[f[1]+" "+f[2]] {
			t.Errorf("%s: a generated policy's deny names %s for %s, which the webhook's does not:\n  policy: %s\n  webhook: %q", what, f[2], f[1], m, webhookMsgs)
		}
	}
}
