package chart

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

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
	mustKubectl(t, "", "delete", "validatingwebhookconfiguration", "dsguard", "rbac-dsguard", "--ignore-not-found")
	mustKubectl(t, "", "create", "namespace", smNamespace)
	dir := t.TempDir()
	webhookPort, healthPort := freePort(t), freePort(t)

	h := helms()[1]
	if r := helm(t, h, "install", smRelease, "charts/dsguard", "--namespace", smNamespace,
		"--set", "tls.mode=selfManaged",
		"--set", fmt.Sprintf("webhook.url=https://localhost:%d", webhookPort)); r.Err != nil {
		t.Fatal(r.Error())
	}
	t.Cleanup(func() { helm(t, h, "uninstall", smRelease, "--namespace", smNamespace) })

	dsguard, took := startDsguard(t, smUser, healthPort, "serve", "--kubeconfig", impersonatingKubeconfigFor(t, dir, smUser, smGroups),
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
}
