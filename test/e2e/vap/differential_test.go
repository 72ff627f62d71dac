package vap

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/dsguard/dsguard/test/e2e/framework"
	"github.com/dsguard/dsguard/vap"
	"github.com/dsguard/dsguard/vap/vaptest"
)

// The namespaces every object is judged in: an ordinary one, kube-system
// (warn only by default), and ones the test policies scope by name and glob.
var namespaces = []string{"fixtures", "kube-system", "team-a", "team-scratch", "legacy-app", "sandbox-1"}

// ratchetNamespace holds stored copies of the fixtures, for UPDATE verdicts.
const ratchetNamespace = "ratchet"

// generatedCount is how many generated DaemonSets join the fixtures.
const generatedCount = 100

// subject is one object to judge.
type subject struct {
	name string
	ds   *appsv1.DaemonSet
}

// diffSeed is the generated DaemonSets' seed: DSGUARD_VAP_SEED replays one,
// otherwise a new one each run, printed first.
func diffSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("DSGUARD_VAP_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("DSGUARD_VAP_SEED=%q: %v", v, err)
		}
	}
	fmt.Fprintf(os.Stderr, "vap differential: seed %d (replay with DSGUARD_VAP_SEED=%d)\n", seed, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with DSGUARD_VAP_SEED=%d", seed)
		}
	})
	return seed
}

// TestDifferential_WebhookAndGeneratedPoliciesAgree judges every rule fixture
// and every generated DaemonSet, in several namespaces, through the real API
// server twice per policy document: once with the webhook, once with the
// ValidatingAdmissionPolicies `dsguard vap` renders from the same document,
// and requires the same verdict (deny, warn or allow) from both, given by
// the same rules, the messages naming those rules (see agrees). Stored
// fixtures are also updated three ways (spec unchanged, spec changed with the
// findings kept, a new offending container) to compare ratcheting.
//
// node-coverage needs the live nodes and is not rendered, so the webhook's
// copy of each document turns it off; everything else is the same document.
//
// control-plane-toleration's placement check is where the two could differ
// by design: the webhook judges a placement against the live nodes that
// carry the taint, the generated policy against the model nodes
// (coverage.ModelTaintedNodes). The suite's tainted nodes are those model
// nodes (see suiteNodes), so both judge the same thing, and every DaemonSet
// is compared, those that select nodes included. Only a DaemonSet that names
// the model node can tell them apart (agreesApartFromTheModelName): each
// verdict where the generated policies answer that rule and the webhook does
// not is judged again with that rule's policies removed, and must then be
// the webhook's (compareWithoutRule).
func TestDifferential_WebhookAndGeneratedPoliciesAgree(t *testing.T) {
	ctx := t.Context()
	j, err := newJudge(cluster.Config())
	if err != nil {
		t.Fatal(err)
	}
	fixtures := loadFixtures(t)
	subjects := slices.Clone(fixtures)
	seed := diffSeed(t)
	for _, ds := range vaptest.Generate(seed, generatedCount) {
		subjects = append(subjects, subject{name: ds.Name, ds: ds})
	}
	subjects = append(subjects, modelNameSubjects(t)...)
	requireModelPlacement(t, subjects)
	for _, ns := range append(slices.Clone(namespaces), ratchetNamespace) {
		createNamespace(t, ns)
	}
	webhooks := savedWebhooks

	// The stored objects for UPDATEs are created with no admission in the way.
	removeWebhookConfiguration(t)
	waitQuiet(t, j)
	for _, f := range fixtures {
		ds := f.ds.DeepCopy()
		ds.Namespace = ratchetNamespace
		if _, err := j.kube.AppsV1().DaemonSets(ratchetNamespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatalf("storing %s: %v", f.name, err)
		}
	}
	restoreWebhookConfiguration(t, webhooks)
	waitForWebhook(t, j)

	docs, err := filepath.Glob(filepath.Join(cluster.Root, "vap", "testdata", "policies", "*.yaml"))
	if err != nil || len(docs) < 4 {
		t.Fatalf("want the default and at least three other policies, found %v (%v)", docs, err)
	}
	for _, doc := range docs {
		requireSuiteTaints(t, doc)
	}
	compared := map[string]int{}
	mismatched := 0
	for _, doc := range docs {
		name := strings.TrimSuffix(filepath.Base(doc), ".yaml")
		t.Run(name, func(t *testing.T) {
			// Whatever happens, the next document starts from the webhook alone.
			defer func() {
				deleteGeneratedPolicies(t)
				restoreWebhookConfiguration(t, webhooks)
			}()
			data, err := os.ReadFile(doc)
			if err != nil {
				t.Fatal(err)
			}
			setWebhookPolicy(t, withoutNodeCoverage(t, data))
			webhook := judgeAll(t, j, subjects, fixtures)
			probeVerdict, err := j.create(t.Context(), "fixtures", probe(t))
			if err != nil {
				t.Fatal(err)
			}

			removeWebhookConfiguration(t)
			waitQuiet(t, j)
			applyGeneratedPolicies(t, doc)
			waitForPolicies(t, j, probeVerdict.kind)
			mismatches, late := 0, 0
			var setAside []string
			for _, key := range slices.Sorted(maps.Keys(webhook)) {
				want := webhook[key]
				agrees := agrees
				modelName := namesTheModelNode(key, subjects)
				if modelName {
					agrees = agreesApartFromTheModelName
				}
				got := judgeOne(t, j, key, subjects, fixtures)
				// A generated policy the API server has not loaded yet
				// stays silent: an answer missing, and only that, is asked
				// again a few times, and each such late agreement is
				// reported with its attempt. Any other disagreement fails
				// at once.
				attempt := 1
				first := got
				for ; !agrees(want, got) && missingOnly(want, got) && attempt < 5; attempt++ {
					time.Sleep(time.Second)
					got = judgeOne(t, j, key, subjects, fixtures)
				}
				switch {
				case !agrees(want, got):
					mismatches++
					t.Errorf("%s: webhook %s\n    generated policies, attempt %d: %s\n    generated policies, attempt 1: %s", key, want, attempt, got, first)
				case attempt > 1:
					late++
					t.Logf("%s: agreed on attempt %d; attempt 1 gave %s, the webhook %s", key, attempt, first, want)
				}
				if modelName && setAsideForTheModelName(want, got) {
					// Set aside only where the model nodes explain it.
					if !modelReachOnly(t, subjectOf(key, subjects)) {
						mismatches++
						t.Errorf("%s: the generated policies answer %s, the webhook does not, and its placement reaches the model's tainted nodes no differently from the suite's: webhook %s\n    generated policies: %s",
							key, modelNameRule, want, got)
					}
					setAside = append(setAside, key)
				}
				compared[want.kind]++
			}
			// modelNameSubjects draw such verdicts under every document.
			if len(setAside) == 0 {
				t.Errorf("no verdict set aside for %s's model nodes: the second comparison, without its policies, compared nothing", modelNameRule)
			} else {
				mismatches += compareWithoutRule(t, j, modelNameRule, setAside, webhook, subjects, fixtures)
			}
			if late > 0 {
				t.Logf("policy %s: %d verdicts agreed only on a later attempt (a policy loading late)", name, late)
			}
			t.Logf("policy %s: %d verdicts compared, %d mismatches", name, len(webhook), mismatches)
			mismatched += mismatches
			deleteGeneratedPolicies(t)
			waitQuiet(t, j)
			restoreWebhookConfiguration(t, webhooks)
			waitForWebhook(t, j)
		})
	}
	total := compared["deny"] + compared["warn"] + compared["allow"]
	t.Logf("%d objects (%d fixtures, %d generated) in %d namespaces plus %d stored fixtures updated 3 ways, under %d policies: "+
		"%d verdicts compared (%d deny, %d warn, %d allow), %d mismatches",
		len(subjects), len(fixtures), len(subjects)-len(fixtures), len(namespaces), len(fixtures), len(docs),
		total, compared["deny"], compared["warn"], compared["allow"], mismatched)
	// The comparison means something only if every verdict occurs often.
	for _, kind := range []string{"deny", "warn", "allow"} {
		if compared[kind] < 100 {
			t.Errorf("only %d %s verdicts compared; the subjects must exercise every outcome", compared[kind], kind)
		}
	}
}

// A key names one judgement: "create/<namespace>/<subject>" or
// "update-<how>/<fixture>".
var updates = []string{"labels", "template", "new-container"}

func judgeAll(t *testing.T, j *judge, subjects, fixtures []subject) map[string]verdict {
	t.Helper()
	out := map[string]verdict{}
	for _, ns := range namespaces {
		for _, s := range subjects {
			key := "create/" + ns + "/" + s.name
			out[key] = judgeOne(t, j, key, subjects, fixtures)
		}
	}
	for _, how := range updates {
		for _, f := range fixtures {
			key := "update-" + how + "/" + f.name
			out[key] = judgeOne(t, j, key, subjects, fixtures)
		}
	}
	return out
}

func judgeOne(t *testing.T, j *judge, key string, subjects, fixtures []subject) verdict {
	t.Helper()
	ctx := t.Context()
	kind, rest, _ := strings.Cut(key, "/")
	var v verdict
	var err error
	if kind == "create" {
		ns, name, _ := strings.Cut(rest, "/")
		v, err = j.create(ctx, ns, find(subjects, name))
	} else {
		v, err = j.update(ctx, changed(t, j, strings.TrimPrefix(kind, "update-"), rest))
	}
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

func find(subjects []subject, name string) *appsv1.DaemonSet {
	for _, s := range subjects {
		if s.name == name {
			return s.ds
		}
	}
	panic("no subject " + name)
}

// changed reads a stored fixture and changes it one way.
func changed(t *testing.T, j *judge, how, name string) *appsv1.DaemonSet {
	ds, err := j.kube.AppsV1().DaemonSets(ratchetNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "labels":
		if ds.Labels == nil {
			ds.Labels = map[string]string{}
		}
		ds.Labels["dsguard.io/touched"] = "yes"
	case "template":
		if ds.Spec.Template.Annotations == nil {
			ds.Spec.Template.Annotations = map[string]string{}
		}
		ds.Spec.Template.Annotations["dsguard.io/revision"] = "2"
	case "new-container":
		ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, corev1.Container{
			Name: "added", Image: "busybox:latest",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		})
	}
	return ds
}

// loadFixtures reads every rule fixture (policy/testdata/rules/*/allowed and
// denied), named after its file.
func loadFixtures(t *testing.T) []subject {
	t.Helper()
	var files []string
	for _, dir := range []string{"policy/rules/testdata/rules", "policy/testdata/rules"} {
		found, err := filepath.Glob(filepath.Join(cluster.Root, dir, "*", "*", "*.yaml"))
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
	var out []subject
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ds := &appsv1.DaemonSet{}
		if err := yaml.UnmarshalStrict(data, ds); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// Unique, valid names for the stored copies.
		ds.Name = fmt.Sprintf("f%02d-%s", i, strings.TrimSuffix(filepath.Base(f), ".yaml"))
		out = append(out, subject{name: ds.Name, ds: ds})
	}
	return out
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	r := cluster.Kubectl(t.Context(), "", "create", "namespace", name)
	if r.Err != nil && !strings.Contains(r.Stderr, "AlreadyExists") {
		t.Fatal(r.Error())
	}
}

const webhookConfigName = "dsguard"

// savedWebhooks is the suite's webhook configuration, as the framework
// installed it; tests remove it and put it back.
var savedWebhooks *admissionregistrationv1.ValidatingWebhookConfiguration

func saveWebhookConfiguration(ctx context.Context) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	j, err := newJudge(cluster.Config())
	if err != nil {
		return nil, err
	}
	vwc, err := j.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhookConfigName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	vwc.ResourceVersion, vwc.UID, vwc.ManagedFields, vwc.CreationTimestamp = "", "", nil, metav1.Time{}
	return vwc, nil
}

func removeWebhookConfiguration(t *testing.T) {
	t.Helper()
	j, _ := newJudge(cluster.Config())
	err := j.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(t.Context(), webhookConfigName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// restoreWebhookConfiguration puts the suite's webhook configuration back,
// replacing any other of the same name.
func restoreWebhookConfiguration(t *testing.T, vwc *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	j, _ := newJudge(cluster.Config())
	api := j.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	live, err := api.Get(context.WithoutCancel(t.Context()), vwc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(context.WithoutCancel(t.Context()), vwc.DeepCopy(), metav1.CreateOptions{})
	case err == nil:
		update := vwc.DeepCopy()
		update.ResourceVersion = live.ResourceVersion
		_, err = api.Update(context.WithoutCancel(t.Context()), update, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// probe is node-exporter without tolerations: every test policy denies or
// warns about it in namespace "fixtures".
func probe(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.Root, "examples", "node-exporter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	if err := yaml.UnmarshalStrict(data, ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// waitUntil dry-runs the probe until ok accepts the verdict.
func waitUntil(t *testing.T, j *judge, what string, ok func(verdict) bool) {
	t.Helper()
	p := probe(t)
	deadline := time.Now().Add(30 * time.Second)
	var last verdict
	for time.Now().Before(deadline) {
		v, err := j.create(t.Context(), "fixtures", p)
		if err != nil {
			t.Fatal(err)
		}
		if ok(v) {
			return
		}
		last = v
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not after 30s; last verdict %s", what, last)
}

// waitQuiet waits until neither the webhook nor a generated policy answers.
func waitQuiet(t *testing.T, j *judge) {
	waitUntil(t, j, "no admission by dsguard", func(v verdict) bool { return v.kind == "allow" })
}

func waitForWebhook(t *testing.T, j *judge) {
	// node-exporter draws a deny or a warning from the webhook under every
	// test policy; a generated policy's answer names itself.
	waitUntil(t, j, "the webhook answers", func(v verdict) bool {
		return v.kind != "allow" && !strings.Contains(v.text, "ValidatingAdmissionPolicy")
	})
}

// waitForPolicies waits until the generated policies answer the probe as the
// webhook did (kind: deny or warn). Which rule answers depends on the
// document: under one that only warns about control-plane-toleration, a
// deny by another rule (image-pinned with requireDigest) is the whole answer,
// and the API server names one denying policy of several in no fixed order.
func waitForPolicies(t *testing.T, j *judge, kind string) {
	waitUntil(t, j, "the generated policies answer the probe with "+kind+" as the webhook did", func(v verdict) bool {
		return v.kind == kind && strings.Contains(v.text, "ValidatingAdmissionPolicy 'dsguard-")
	})
}

// withoutNodeCoverage returns the document with every rule that is not
// rendered (node-coverage, placement-size) off. It goes through yaml.v3, as
// dsguard does: YAML 1.1 decoders read "off" as false.
func withoutNodeCoverage(t *testing.T, doc []byte) string {
	t.Helper()
	var m map[string]any
	if err := yamlv3.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	rulesDoc, _ := m["rules"].(map[string]any)
	if rulesDoc == nil {
		rulesDoc = map[string]any{}
	}
	for _, r := range rules.Builtin().Rules() {
		if vap.Renders(r.ID) {
			continue
		}
		rc, _ := rulesDoc[r.ID].(map[string]any)
		if rc == nil {
			rc = map[string]any{}
		}
		rc["action"] = "off"
		rulesDoc[r.ID] = rc
	}
	m["rules"] = rulesDoc
	out, err := yamlv3.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// setWebhookPolicy applies the policy ConfigMap and waits until dsguard has
// loaded it (one more "policy loaded" line in its log).
func setWebhookPolicy(t *testing.T, doc string) {
	t.Helper()
	before := strings.Count(cluster.DsguardLog(), `"policy loaded"`)
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dsguard-policy\n  namespace: " + framework.Namespace +
		"\n  labels:\n    dsguard.io/policy: \"true\"\ndata:\n  policy.yaml: |\n")
	for _, line := range strings.Split(strings.TrimRight(doc, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	if r := cluster.Kubectl(t.Context(), b.String(), "apply", "-f", "-"); r.Err != nil {
		t.Fatal(r.Error())
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(cluster.DsguardLog(), `"policy loaded"`) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("dsguard did not load the policy within 30s; log:\n%s", cluster.DsguardLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// applyGeneratedPolicies renders the document with `dsguard vap` and applies
// the result server-side.
func applyGeneratedPolicies(t *testing.T, doc string) {
	t.Helper()
	ctx := t.Context()
	r := framework.Run(ctx, cluster.Root, "", nil, cluster.Dsguard, "vap", "--config", doc, "--namespace", framework.Namespace)
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	// A loaded API server may time out a request; apply is idempotent.
	for try := 0; ; try++ {
		a := cluster.Kubectl(ctx, r.Stdout, "apply", "--server-side", "--field-manager=dsguard", "-f", "-")
		if a.Err == nil {
			return
		}
		if try == 2 || !strings.Contains(a.Stderr, "Timeout") {
			t.Fatal(a.Error())
		}
	}
}

func deleteGeneratedPolicies(t *testing.T) {
	t.Helper()
	r := cluster.Kubectl(t.Context(), "", "delete", "validatingadmissionpolicybindings,validatingadmissionpolicies",
		"-l", "app.kubernetes.io/managed-by=dsguard", "--wait")
	if r.Err != nil {
		t.Fatal(r.Error())
	}
}

// compareWithoutRule removes rule's generated policies and judges keys
// again, each set aside by agreesApartFromTheModelName: with that rule's
// answers gone, the other policies' answers must give the webhook's verdict
// (agrees: the same outcome, the same rules, the same rule and field in the
// deny message). The API server may run a removed policy for a while; its
// answer names rule, which the webhook's does not for these keys, and only
// such an answer is asked again.
func compareWithoutRule(t *testing.T, j *judge, rule string, keys []string, webhook map[string]verdict, subjects, fixtures []subject) int {
	t.Helper()
	r := cluster.Kubectl(t.Context(), "", "delete", "validatingadmissionpolicybindings,validatingadmissionpolicies",
		"-l", vap.RuleLabel+"="+rule, "--wait")
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	mismatches, late := 0, 0
	for _, key := range keys {
		want := webhook[key]
		got := judgeOne(t, j, key, subjects, fixtures)
		attempt := 1
		for ; slices.Contains(got.rules, rule) && attempt < 10; attempt++ {
			time.Sleep(time.Second)
			got = judgeOne(t, j, key, subjects, fixtures)
		}
		switch {
		case !agrees(want, got):
			mismatches++
			t.Errorf("%s: webhook %s\n    generated policies without %s's, attempt %d: %s", key, want, rule, attempt, got)
		case attempt > 1:
			late++
		}
	}
	t.Logf("%d verdicts set aside for %s's model nodes compared again without its policies (%d after it was gone), %d mismatches",
		len(keys), rule, late, mismatches)
	return mismatches
}

// modelNameSubjects are node-exporter (no tolerations) placed on the model
// node's arm64 twin by its name, as nodeName and as matchFields, alone and
// privileged with a :latest image: the generated policies see
// control-plane-toleration reach the model's arm64 node, which the suite's
// nodes name otherwise, and deny where the webhook finds nothing to deny
// for it; the DaemonSets are what compareWithoutRule must judge alike
// without that rule's policies, whatever else they break.
func modelNameSubjects(t *testing.T) []subject {
	t.Helper()
	arm64 := map[string]string{corev1.LabelArchStable: "arm64"}
	byName := probe(t)
	byName.Name = "model-name-arm64"
	byName.Spec.Template.Spec.NodeName = coverage.ModelNodeName
	byName.Spec.Template.Spec.NodeSelector = arm64
	byField := probe(t)
	byField.Name = "model-field-arm64"
	byField.Spec.Template.Spec.NodeSelector = arm64
	byField.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{coverage.ModelNodeName}}},
		}}},
	}}
	var out []subject
	for _, ds := range []*appsv1.DaemonSet{byName, byField} {
		worse := ds.DeepCopy()
		worse.Name += "-privileged"
		c := &worse.Spec.Template.Spec.Containers[0]
		c.Image, c.SecurityContext = "quay.io/prometheus/node-exporter:latest", &corev1.SecurityContext{Privileged: ptr.To(true)}
		out = append(out, subject{name: ds.Name, ds: ds}, subject{name: worse.Name, ds: worse})
	}
	return out
}

// subjectOf is the DaemonSet judged under key (its last path element is the
// subject's name).
func subjectOf(key string, subjects []subject) *appsv1.DaemonSet {
	return find(subjects, key[strings.LastIndex(key, "/")+1:])
}

// namesTheModelNode reports whether the subject judged under key (its last
// path element is the subject's name) names the model node by name.
func namesTheModelNode(key string, subjects []subject) bool {
	name := key[strings.LastIndex(key, "/")+1:]
	for _, s := range subjects {
		if s.name == name {
			return slices.Contains(namedNodes(s.ds), coverage.ModelNodeName)
		}
	}
	return false
}
