package chart

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

const (
	smNamespace = "dsguard-sm"
	smRelease   = "sm"
	smFullname  = "sm-dsguard"
)

var (
	smUser   = "system:serviceaccount:" + smNamespace + ":" + smFullname
	smGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + smNamespace}
)

// smMatrix is what self-managed certificates add, and what stays forbidden.
var smMatrix = []canI{
	{verb: "get", resource: "secrets/" + smFullname + "-ca", namespace: smNamespace, want: true},
	{verb: "list", resource: "secrets/" + smFullname + "-ca", namespace: smNamespace, want: true},
	{verb: "watch", resource: "secrets/" + smFullname + "-ca", namespace: smNamespace, want: true},
	{verb: "update", resource: "secrets/" + smFullname + "-ca", namespace: smNamespace, want: true},
	{verb: "create", resource: "secrets", namespace: smNamespace, want: true},
	{verb: "get", resource: "validatingwebhookconfigurations.admissionregistration.k8s.io/" + smFullname, want: true},
	{verb: "update", resource: "validatingwebhookconfigurations.admissionregistration.k8s.io/" + smFullname, want: true},

	{verb: "list", resource: "secrets", namespace: smNamespace},
	{verb: "get", resource: "secrets/other", namespace: smNamespace},
	{verb: "delete", resource: "secrets/" + smFullname + "-ca", namespace: smNamespace},
	{verb: "get", resource: "secrets/" + smFullname + "-ca", namespace: "default"},
	{verb: "update", resource: "validatingwebhookconfigurations.admissionregistration.k8s.io/other"},
	{verb: "delete", resource: "validatingwebhookconfigurations.admissionregistration.k8s.io/" + smFullname},
	{verb: "list", resource: "validatingwebhookconfigurations.admissionregistration.k8s.io"},
	{verb: "update", resource: "mutatingwebhookconfigurations.admissionregistration.k8s.io/" + smFullname},
}

// TestSelfManagedCertificates_ServiceAccountSuffices installs the chart with
// tls.mode=selfManaged and runs dsguard as its ServiceAccount with no
// certificate material: it creates its CA Secret, fills in the caBundle of the
// release's webhook configuration, becomes ready and rejects kubectl, without
// a forbidden request; can-i confirms the extra grants are by name.
func TestSelfManagedCertificates_ServiceAccountSuffices(t *testing.T) {
	// Only this release's webhook may answer.
	withoutSuiteWebhook(t)
	mustKubectl(t, "", "create", "namespace", smNamespace)
	dir := t.TempDir()
	webhookPort, healthPort := freePort(t), freePort(t)

	h := helms()[1]
	if r := helm(t, h, "install", smRelease, "charts/dsguard", "--namespace", smNamespace,
		"--set", "tls.mode=selfManaged",
		"--set", fmt.Sprintf("webhook.url=https://localhost:%d", webhookPort)); r.Err != nil {
		t.Fatal(r.Error())
	}
	t.Cleanup(func() { uninstall(t, h, smRelease, smNamespace) })

	dsguard, took := cluster.StartDsguardFor(t, smUser, healthPort, "serve", "--kubeconfig", impersonatingKubeconfigFor(t, dir, smUser, smGroups),
		"--namespace", smNamespace, "--host", "127.0.0.1", "--port", strconv.Itoa(webhookPort),
		"--cert-mode=self-managed", "--cert-dns-names=localhost", "--webhook-config-name="+smFullname,
		"--ca-secret="+smFullname+"-ca", "--ca-publish-grace=1s", "--ca-sync-interval=500ms",
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(healthPort),
		"--metrics-bind-address", "0", "--leader-elect=true", "--shutdown-timeout", "5s")
	dsguardLog := dsguard.Log
	t.Logf("ready %s after start, with no certificate material given", took.Round(100*time.Millisecond))

	if ca := kubectl(t, "", "get", "secret", smFullname+"-ca", "-n", smNamespace, "-o", "jsonpath={.data.ca\\.crt}"); ca.Stdout == "" {
		t.Fatal("no CA in the Secret")
	}
	bundle := kubectl(t, "", "get", "validatingwebhookconfiguration", smFullname, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
	if bundle.Stdout == "" {
		t.Fatal("the caBundle was not filled in")
	}
	nodeExporter := example(t, "node-exporter.yaml")
	var last framework.Result
	eventually(t, 30*time.Second, func() bool {
		last = kubectl(t, nodeExporter, "apply", "--dry-run=server", "-f", "-")
		return denied(last, dsWebhook, cpDenied)
	}, func() string { return last.Stderr })

	if log := dsguardLog(); strings.Contains(strings.ToLower(log), "forbidden") {
		t.Errorf("dsguard hit a forbidden request as %s:\n%s", smUser, log)
	}
	checkCanI(t, smUser, smGroups, smMatrix)
	checkAdmissionPolicy(t, dsguardLog)
	checkForeignCADropped(t)
}

// checkForeignCADropped slips a foreign CA into the caBundle, as someone with
// write access to the webhook configuration might to have the API server
// trust a server of theirs: dsguard's next sync leaves only its own CA.
func checkForeignCADropped(t *testing.T) {
	t.Helper()
	vwc := "validatingwebhookconfiguration/" + smFullname
	bundleOf := func() []byte {
		b64 := strings.TrimSpace(kubectl(t, "", "get", vwc, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}").Stdout)
		pem, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatalf("caBundle %q: %v", b64, err)
		}
		return pem
	}
	foreign, _, err := certutil.GenerateSelfSignedCertKey("attacker.invalid", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tampered := base64.StdEncoding.EncodeToString(append(bundleOf(), foreign...))
	mustKubectl(t, "", "patch", vwc, "--type=json", "-p", `[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"`+tampered+`"}]`)
	eventually(t, 30*time.Second, func() bool {
		b := bundleOf()
		return len(b) > 0 && !bytes.Contains(b, bytes.TrimSpace(foreign))
	}, func() string { return "the foreign CA is still in the caBundle:\n" + string(bundleOf()) })
}

// policyDenied is how the API server words a refusal by the chart's
// ValidatingAdmissionPolicy.
const policyDenied = "ValidatingAdmissionPolicy '" + smFullname + "-self-managed' with binding '" + smFullname + "-self-managed' denied request"

// checkAdmissionPolicy proves, as dsguard's ServiceAccount, what RBAC allows
// and the chart's ValidatingAdmissionPolicy narrows: of the webhook
// configuration only the caBundle may change, and no Secret but the CA may be
// created. dsguard itself, running as that account, kept the caBundle in step.
func checkAdmissionPolicy(t *testing.T, dsguardLog func() string) {
	t.Helper()
	as := []string{"--as=" + smUser}
	for _, g := range smGroups {
		as = append(as, "--as-group="+g)
	}
	asSA := func(stdin string, args ...string) framework.Result {
		return kubectl(t, stdin, append(args, as...)...)
	}
	vwc := "validatingwebhookconfiguration/" + smFullname
	// RBAC grants update, not patch: the change is computed here (kubectl
	// patch --dry-run=client) and sent as dsguard sends it, a whole update.
	update := func(patch string) framework.Result {
		changed := mustKubectl(t, "", "patch", vwc, "--type=json", "-p", patch, "--dry-run=client", "-o", "json")
		return asSA(changed, "replace", "-f", "-")
	}
	// The policy takes effect once the API server has loaded it; the first
	// refusal shows it has.
	var last framework.Result
	eventually(t, 30*time.Second, func() bool {
		last = update(`[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`)
		return last.ExitCode != 0 && strings.Contains(last.Stderr, policyDenied)
	}, func() string { return last.Stderr })

	for _, c := range []struct {
		name, patch string
	}{
		{"point the webhook elsewhere", `[{"op":"replace","path":"/webhooks/0/clientConfig/url","value":"https://attacker.invalid/validate"}]`},
		{"match Secrets instead", `[{"op":"replace","path":"/webhooks/0/rules/0/resources","value":["secrets"]}]`},
		{"exempt a namespace", `[{"op":"add","path":"/webhooks/0/namespaceSelector/matchExpressions/0/values/-","value":"default"}]`},
		{"add an object selector", `[{"op":"add","path":"/webhooks/0/objectSelector","value":{"matchLabels":{"skip":"no"}}}]`},
		{"drop a webhook", `[{"op":"remove","path":"/webhooks/1"}]`},
		{"relabel the configuration", `[{"op":"add","path":"/metadata/labels/owner","value":"me"}]`},
		// A fake owner would let the garbage collector delete the
		// configuration; a finalizer would keep a deleted one half alive.
		{"give it an owner", `[{"op":"add","path":"/metadata/ownerReferences","value":[{"apiVersion":"v1","kind":"Namespace","name":"default","uid":"00000000-0000-0000-0000-000000000001"}]}]`},
		{"add a finalizer", `[{"op":"add","path":"/metadata/finalizers","value":["example.com/hold"]}]`},
		{"shorten the timeout", `[{"op":"replace","path":"/webhooks/0/timeoutSeconds","value":1}]`},
	} {
		if r := update(c.patch); r.ExitCode == 0 || !strings.Contains(r.Stderr, policyDenied) {
			t.Errorf("%s: want refused by the admission policy:\n%s%s", c.name, r.Stdout, r.Stderr)
		}
	}
	// The caBundle alone may change: the same CAs twice is a different value
	// that still verifies dsguard.
	bundle := strings.TrimSpace(kubectl(t, "", "get", vwc, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}").Stdout)
	pem, err := base64.StdEncoding.DecodeString(bundle)
	if err != nil || bundle == "" {
		t.Fatalf("caBundle %q: %v", bundle, err)
	}
	doubled := base64.StdEncoding.EncodeToString(append(pem, pem...))
	if r := update(`[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"` + doubled + `"}]`); r.Err != nil {
		t.Errorf("a caBundle change by dsguard's account is refused: %v", r.Error())
	}

	// Secrets: the CA by name only (a server-side dry run stores nothing).
	if r := asSA("", "create", "secret", "generic", "stolen", "-n", smNamespace, "--from-literal=k=v", "--dry-run=server"); r.ExitCode == 0 ||
		!strings.Contains(r.Stderr, policyDenied) {
		t.Errorf("creating another Secret: want refused by the admission policy:\n%s", r.Stderr)
	}
	if r := asSA("", "create", "secret", "generic", smFullname+"-ca", "-n", smNamespace, "--from-literal=k=v", "--dry-run=server"); strings.Contains(r.Stderr, policyDenied) ||
		!strings.Contains(r.Stderr, "already exists") {
		t.Errorf("creating the CA Secret (which exists) must pass the policy and meet \"already exists\":\n%s", r.Stderr)
	}
	// Nobody else is narrowed: the admin changes the timeout and back.
	mustKubectl(t, "", "patch", vwc, "--type=json", "-p", `[{"op":"replace","path":"/webhooks/0/timeoutSeconds","value":4}]`)
	mustKubectl(t, "", "patch", vwc, "--type=json", "-p", `[{"op":"replace","path":"/webhooks/0/timeoutSeconds","value":5}]`)

	if log := dsguardLog(); strings.Contains(log, "ValidatingAdmissionPolicy") {
		t.Errorf("dsguard's own caBundle upkeep met the admission policy:\n%s", log)
	}
}
