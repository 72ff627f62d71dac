package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

// fixturesDir holds one folder per rule, each with allowed/ and denied/
// DaemonSet manifests: adding a case is adding a file.
const fixturesDir = "testdata/rules"

// minFixtures is how many allowed and how many denied manifests every rule
// must have.
const minFixtures = 2

// fixtureNamespace is where fixtures are judged, whatever namespace they
// name: outside kube-system, so that no namespace ceiling softens a deny.
const fixtureNamespace = "fixtures"

// expectFile, in a denied folder, names for each fixture the field path of
// its deny and a fragment of the message.
const expectFile = "expect.yaml"

// denyExpectation is what one denied fixture must draw from its rule.
type denyExpectation struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// TestRuleFixtures walks testdata/rules/<rule-id>/{allowed,denied}/*.yaml
// and evaluates each DaemonSet under a policy that denies on every rule. An
// allowed manifest must draw no finding from its rule; a denied one a deny
// from it at the field, and with the message fragment, that denied/expect.yaml
// names for it, so that a fixture cannot pass for the wrong reason.
func TestRuleFixtures(t *testing.T) {
	cfg := Builtin().DefaultConfig()
	for _, r := range Builtin().Rules() {
		cfg.Rules.Options(r.ID).Action = policy.ActionDeny
	}
	p, err := policy.Compile(cfg)
	if err != nil {
		t.Fatalf("compile the all-deny policy: %v", err)
	}
	for _, r := range Builtin().Rules() {
		if a, _ := p.RuleAction(r.ID); a != policy.ActionDeny {
			t.Fatalf("rule %s has action %q in the all-deny policy", r.ID, a)
		}
	}
	env := policy.Env{Policy: p, Now: testobj.Now}

	dirs, err := os.ReadDir(fixturesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, ok := Builtin().Get(d.Name()); !ok || !d.IsDir() {
			t.Errorf("%s/%s does not name a registered rule", fixturesDir, d.Name())
		}
	}

	for _, r := range Builtin().Rules() {
		t.Run(r.ID, func(t *testing.T) {
			env := env
			env.Nodes = readFixtureNodes(t, r)
			env.Previous = readFixturePrevious(t, r)
			change := readFixtureNodeChange(t, r)
			others := readFixtureDaemonSets(t, r)
			if r.NeedsFit || others.pods {
				env.Fit = readFixtureCluster(t, r)
			}
			if others.daemonSets != nil {
				env.DaemonSets = func() []*appsv1.DaemonSet { return others.daemonSets }
			}
			expect := readExpectations(t, r)
			for _, verdict := range []string{"allowed", "denied"} {
				files, err := filepath.Glob(filepath.Join(fixturesDir, r.ID, verdict, "*.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == expectFile })
				if len(files) < minFixtures {
					t.Errorf("%s needs at least %d fixtures in %s, has %d",
						r.ID, minFixtures, filepath.Join(fixturesDir, r.ID, verdict), len(files))
				}
				for _, file := range files {
					t.Run(verdict+"/"+filepath.Base(file), func(t *testing.T) {
						ds := readFixture(t, file)
						ds.Namespace = fixtureNamespace
						env := env
						if change != nil {
							// Every fixture runs a Pod on the node.
							c := *change
							c.WithPod = map[types.NamespacedName]bool{{Namespace: ds.Namespace, Name: ds.Name}: true}
							env.NodeChange = &c
						}
						fs := policy.Evaluate(ds, env)
						mine := findingsOf(fs, r.ID)
						if verdict == "allowed" && len(mine) > 0 {
							t.Errorf("allowed fixture drew %s findings:\n%s", r.ID, describeFindings(mine))
						}
						if verdict == "denied" {
							checkDeny(t, mine, fs, expect, filepath.Base(file))
						}
					})
				}
			}
		})
	}
}

// checkDeny requires a deny among mine at the expected field whose message
// holds the expected fragment.
func checkDeny(t *testing.T, mine, all []policy.Finding, expect map[string]denyExpectation, name string) {
	t.Helper()
	want, ok := expect[name]
	if !ok {
		t.Fatalf("%s names no field and message for %s", expectFile, name)
	}
	if policy.Count(mine, policy.ActionDeny) == 0 {
		t.Fatalf("denied fixture drew no deny from its rule; all findings:\n%s", describeFindings(all))
	}
	for _, f := range mine {
		if f.Action == policy.ActionDeny && f.FieldString() == want.Field && strings.Contains(f.Message, want.Message) {
			return
		}
	}
	t.Errorf("no deny at %s with %q; the rule's findings:\n%s", want.Field, want.Message, describeFindings(mine))
}

// readExpectations reads denied/expect.yaml of a rule's fixtures; every entry
// must name a fixture that exists.
func readExpectations(t *testing.T, r *policy.Rule) map[string]denyExpectation {
	t.Helper()
	dir := filepath.Join(fixturesDir, r.ID, "denied")
	data, err := os.ReadFile(filepath.Join(dir, expectFile))
	if err != nil {
		t.Fatalf("every denied fixture needs its field and message in %s: %v", expectFile, err)
	}
	var expect map[string]denyExpectation
	if err := yaml.UnmarshalStrict(data, &expect); err != nil {
		t.Fatalf("%s: %v", filepath.Join(dir, expectFile), err)
	}
	for name, e := range expect {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s names %s, which is not a fixture: %v", expectFile, name, err)
		}
		if e.Field == "" || e.Message == "" {
			t.Errorf("%s: %s needs both field and message", expectFile, name)
		}
	}
	return expect
}

// readFixtureNodes reads testdata/rules/<rule-id>/nodes.yaml, in the form of
// `kubectl get nodes -o yaml`, when the folder has one; rules that need nodes
// must have it.
// readFixturePrevious reads <rule>/previous.yaml, the DaemonSet as stored
// (status included) that each fixture of the rule updates; nil without one,
// and every fixture is then a CREATE.
func readFixturePrevious(t *testing.T, r *policy.Rule) *appsv1.DaemonSet {
	t.Helper()
	file := filepath.Join(fixturesDir, r.ID, "previous.yaml")
	if _, err := os.Stat(file); os.IsNotExist(err) {
		return nil
	}
	ds := readFixture(t, file)
	ds.Namespace = fixtureNamespace
	return ds
}

// readFixtureNodeChange reads <rule>/node-change.yaml, a List of the node
// before and after the change, which every fixture of a rule that judges
// node changes is judged under; nil for the other rules.
func readFixtureNodeChange(t *testing.T, r *policy.Rule) *policy.NodeChange {
	t.Helper()
	if !r.OnNodeChange {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(fixturesDir, r.ID, "node-change.yaml"))
	if err != nil {
		t.Fatalf("rule %s judges node changes: %v", r.ID, err)
	}
	var list struct {
		metav1.TypeMeta `json:",inline"`
		Items           []corev1.Node `json:"items"`
	}
	if err := yaml.UnmarshalStrict(data, &list); err != nil {
		t.Fatalf("%s/node-change.yaml: %v", r.ID, err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("%s/node-change.yaml holds %d nodes, want 2 (before, after)", r.ID, len(list.Items))
	}
	return &policy.NodeChange{Before: &list.Items[0], After: &list.Items[1]}
}

func readFixtureNodes(t *testing.T, r *policy.Rule) *coverage.NodeSnapshot {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixturesDir, r.ID, "nodes.yaml"))
	if os.IsNotExist(err) && !r.NeedsNodes {
		return nil
	}
	if err != nil {
		t.Fatalf("rule %s needs nodes: %v", r.ID, err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(data, &list); err != nil {
		t.Fatalf("%s/nodes.yaml: %v", r.ID, err)
	}
	var nodes []*corev1.Node
	for _, item := range list.Items {
		if kindOf(t, item) == "Node" {
			var n corev1.Node
			if err := yaml.UnmarshalStrict(item, &n); err != nil {
				t.Fatalf("%s/nodes.yaml: %v", r.ID, err)
			}
			nodes = append(nodes, &n)
		}
	}
	return coverage.NewNodeSnapshot(nodes)
}

// readFixtureCluster reads what the scheduler weighs from the rule's
// nodes.yaml, which for such a rule also holds Pods and PriorityClasses, as
// `kubectl get nodes,pods,priorityclasses -A -o yaml` prints them.
func readFixtureCluster(t *testing.T, r *policy.Rule) *fit.Cluster {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixturesDir, r.ID, "nodes.yaml"))
	if err != nil {
		t.Fatalf("rule %s needs a cluster: %v", r.ID, err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(data, &list); err != nil {
		t.Fatalf("%s/nodes.yaml: %v", r.ID, err)
	}
	b := fit.NewBuilder()
	for _, item := range list.Items {
		switch kind := kindOf(t, item); kind {
		case "Node":
			var n corev1.Node
			mustDecode(t, item, &n)
			b.AddNode(&n)
		case "Pod":
			var p corev1.Pod
			mustDecode(t, item, &p)
			if err := b.AddPod(&p); err != nil {
				t.Fatal(err)
			}
		case "PriorityClass":
			var c schedulingv1.PriorityClass
			mustDecode(t, item, &c)
			b.AddPriorityClass(&c)
		case "Namespace":
			var ns corev1.Namespace
			mustDecode(t, item, &ns)
			b.AddNamespace(&ns)
		case "DaemonSet": // the others, see readFixtureDaemonSets
		default:
			t.Fatalf("%s/nodes.yaml: unexpected kind %q", r.ID, kind)
		}
	}
	return b.Build()
}

// fixtureOthers is what a rule's nodes.yaml holds besides nodes: the other
// DaemonSets of the cluster (nil when it names none) and whether it holds
// Pods.
type fixtureOthers struct {
	daemonSets []*appsv1.DaemonSet
	pods       bool
}

// readFixtureDaemonSets reads the DaemonSets of the rule's nodes.yaml,
// which stand for the cluster's other DaemonSets (in the fixtures'
// namespace unless they name one).
func readFixtureDaemonSets(t *testing.T, r *policy.Rule) fixtureOthers {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixturesDir, r.ID, "nodes.yaml"))
	if os.IsNotExist(err) {
		return fixtureOthers{}
	}
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(data, &list); err != nil {
		t.Fatalf("%s/nodes.yaml: %v", r.ID, err)
	}
	var out fixtureOthers
	for _, item := range list.Items {
		switch kindOf(t, item) {
		case "Pod":
			out.pods = true
		case "DaemonSet":
			var ds appsv1.DaemonSet
			mustDecode(t, item, &ds)
			if ds.Namespace == "" {
				ds.Namespace = fixtureNamespace
			}
			out.daemonSets = append(out.daemonSets, &ds)
		}
	}
	return out
}

func kindOf(t *testing.T, item []byte) string {
	t.Helper()
	var tm metav1.TypeMeta
	if err := json.Unmarshal(item, &tm); err != nil {
		t.Fatal(err)
	}
	return tm.Kind
}

func mustDecode(t *testing.T, item []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(item, into); err != nil {
		t.Fatal(err)
	}
}

// readFixture decodes one manifest strictly (an unknown or misspelt field is
// an error) and checks that it looks like something the API server accepts.
func readFixture(t *testing.T, file string) *appsv1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("# ")) {
		t.Errorf("%s: start with a comment line saying what the fixture shows", file)
	}
	if bytes.Contains(data, []byte("\n---")) {
		t.Fatalf("%s: one DaemonSet per file", file)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(data, &ds); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if err := plausibleDaemonSet(&ds); err != nil {
		t.Fatalf("%s: the API server would reject this manifest: %v", file, err)
	}
	return &ds
}

var percentPattern = regexp.MustCompile(`^[0-9]+%$`)

// plausibleDaemonSet checks what the API server checks before any webhook
// sees the object and what a fixture is most likely to get wrong. It is no
// substitute for apps validation, which lives in k8s.io/kubernetes.
func plausibleDaemonSet(ds *appsv1.DaemonSet) error {
	if ds.APIVersion != "apps/v1" || ds.Kind != "DaemonSet" {
		return fmt.Errorf("apiVersion/kind %s/%s, want apps/v1 DaemonSet", ds.APIVersion, ds.Kind)
	}
	if ds.Name == "" || ds.Namespace == "" {
		return fmt.Errorf("metadata.name and metadata.namespace are required")
	}
	if ds.Spec.Selector == nil {
		return fmt.Errorf("spec.selector is required")
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		return fmt.Errorf("spec.selector must be non-empty and match spec.template.metadata.labels")
	}
	spec := &ds.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		return fmt.Errorf("spec.template.spec.containers is required")
	}
	var names []string
	for _, list := range containerLists {
		for _, c := range list.containers(spec) {
			if c.Name == "" || c.Image == "" || slices.Contains(names, c.Name) {
				return fmt.Errorf("every container needs a unique name and an image")
			}
			names = append(names, c.Name)
		}
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil && !strings.HasPrefix(v.HostPath.Path, "/") {
			return fmt.Errorf("hostPath %q must be absolute", v.HostPath.Path)
		}
	}
	us := ds.Spec.UpdateStrategy
	if us.Type != "" && us.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		return nil
	}
	unavailable, surge := intstr.FromInt32(1), intstr.FromInt32(0) // the apps/v1 defaults
	if ru := us.RollingUpdate; ru != nil {
		if ru.MaxUnavailable != nil {
			unavailable = *ru.MaxUnavailable
		}
		if ru.MaxSurge != nil {
			surge = *ru.MaxSurge
		}
	}
	u, err := intOrPercentValue(unavailable)
	if err != nil {
		return fmt.Errorf("maxUnavailable: %w", err)
	}
	s, err := intOrPercentValue(surge)
	if err != nil {
		return fmt.Errorf("maxSurge: %w", err)
	}
	switch {
	case u != 0 && s != 0:
		return fmt.Errorf("maxSurge may not be set when maxUnavailable is non-zero")
	case u == 0 && s == 0:
		return fmt.Errorf("maxUnavailable may not be 0 when maxSurge is 0")
	}
	return nil
}

// intOrPercentValue mirrors apps validation: a non-negative integer or a
// percentage of at most 100%.
func intOrPercentValue(v intstr.IntOrString) (int, error) {
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return 0, fmt.Errorf("must be greater than or equal to 0")
		}
		return int(v.IntVal), nil
	}
	if !percentPattern.MatchString(v.StrVal) {
		return 0, fmt.Errorf("%q must be an integer or percentage", v.StrVal)
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil || n > 100 {
		return 0, fmt.Errorf("must not be greater than 100%%")
	}
	return n, nil
}
