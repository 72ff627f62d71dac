package chart

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

const (
	namespace = framework.Namespace // dsguard-system, where framework.Start runs dsguard
	dsWebhook = "daemonsets.dsguard.io"
	cpDenied  = "[control-plane-toleration]"
)

// valueSets are the value files the chart's golden tests render
// (test/chart/testdata/values); empty means the defaults.
var valueSets = []string{"", "webhook-url.yaml", "single-replica.yaml"}

// monitored is the value set with a ServiceMonitor and a PrometheusRule,
// whose CRDs the API server lacks until the test installs them.
const monitored = "fail-open-monitored.yaml"

func valuesArgs(file string) []string {
	if file == "" {
		return nil
	}
	return []string{"--values", filepath.Join("test", "chart", "testdata", "values", file)}
}

// render runs `helm template` for release dsguard in dsguard's namespace.
func render(t *testing.T, h helmBin, values string) string {
	t.Helper()
	r := helm(t, h, append([]string{"template", "dsguard", "charts/dsguard", "--namespace", namespace}, valuesArgs(values)...)...)
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	return r.Stdout
}

// kinds counts the objects in rendered manifests.
func kinds(manifests string) int {
	return len(regexp.MustCompile(`(?m)^kind: `).FindAllString(manifests, -1))
}

// TestRenderedChart_IsValidOnTheServer applies what `helm template` renders
// with `kubectl apply --dry-run=server`: the API server validates every object
// (schema, strict field validation, admission) without persisting it.
//
// The namespace warns at the Pod Security "restricted" level, the strictest:
// the chart's Pods must meet it, except with hostNetwork (single-replica).
func TestRenderedChart_IsValidOnTheServer(t *testing.T) {
	h := helms()[0]
	mustKubectl(t, "", "label", "namespace", namespace, "pod-security.kubernetes.io/warn=restricted", "--overwrite")
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		framework.Logged(t, cluster.Kubectl(ctx, "", "label", "namespace", namespace, "pod-security.kubernetes.io/warn-"))
	})
	for _, values := range valueSets {
		name := strings.TrimSuffix(values, ".yaml")
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			manifests := render(t, h, values)
			r := kubectl(t, manifests, "apply", "--dry-run=server", "-f", "-")
			if r.Err != nil {
				t.Fatal(r.Error())
			}
			if got, want := strings.Count(r.Stdout, "(server dry run)"), kinds(manifests); got != want {
				t.Errorf("%d objects accepted, %d rendered", got, want)
			}
			violates := strings.Contains(r.Stderr, `would violate PodSecurity "restricted:latest"`)
			if hostNetwork := values == "single-replica.yaml"; violates != hostNetwork {
				t.Errorf("Pod Security restricted violated: %v, want %v (hostNetwork %v):\n%s", violates, hostNetwork, hostNetwork, r.Stderr)
			}
		})
	}

	// The ServiceMonitor and the PrometheusRule are rendered only when
	// enabled, and then need the Prometheus Operator's CRDs: without them
	// those two objects alone are refused.
	t.Run("fail-open-monitored", func(t *testing.T) {
		manifests := render(t, h, monitored)
		r := kubectl(t, manifests, "apply", "--dry-run=server", "-f", "-")
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
			if r.ExitCode == 0 || !strings.Contains(r.Stderr, `no matches for kind "`+kind+`" in version "monitoring.coreos.com/v1"`) {
				t.Fatalf("without the CRDs, want the %s refused:\n%s", kind, r.Stderr)
			}
		}
		if got, want := strings.Count(r.Stdout, "(server dry run)"), kinds(manifests)-2; got != want {
			t.Errorf("without the CRDs: %d objects accepted, want all %d others", got, want)
		}

		for _, crd := range []string{"servicemonitors", "prometheusrules"} {
			file := prometheusOperatorCRD(t, crd)
			cluster.DeleteOnCleanup(t, "-f", file)
			mustKubectl(t, "", "apply", "--server-side", "-f", file)
			waitEstablished(t, crd+".monitoring.coreos.com")
		}
		var last string
		eventually(t, 15*time.Second, func() bool {
			r = kubectl(t, manifests, "apply", "--dry-run=server", "-f", "-")
			last = r.Stdout + r.Stderr
			return r.Err == nil
		}, func() string { return last })
		for _, obj := range []string{"servicemonitor", "prometheusrule"} {
			if !strings.Contains(r.Stdout, obj+".monitoring.coreos.com/dsguard created (server dry run)") {
				t.Errorf("with the CRDs, want the %s accepted:\n%s", obj, r.Stdout)
			}
		}
		if strings.Count(r.Stdout, "(server dry run)") != kinds(manifests) {
			t.Errorf("with the CRDs, want every object accepted:\n%s", r.Stdout)
		}
	})
}

// TestRenderedChart_CertManagerMode: with tls.mode=certManager the chart
// renders cert-manager objects; without cert-manager's CRDs they alone are
// refused, with its CRDs (from the cert-manager Go module dsguard already
// uses) every object passes the API server's validation.
func TestRenderedChart_CertManagerMode(t *testing.T) {
	h := helms()[0]
	manifests := render(t, h, "cert-manager.yaml")
	if !strings.Contains(manifests, "cert-manager.io/inject-ca-from: "+namespace+"/dsguard-tls") {
		t.Fatalf("the webhook configuration lacks the cainjector annotation:\n%s", manifests)
	}
	// A fresh discovery cache: an earlier test may have run cert-manager and
	// removed its CRDs again.
	r := kubectl(t, manifests, "apply", "--dry-run=server", "--cache-dir", t.TempDir(), "-f", "-")
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, `no matches for kind "Certificate" in version "cert-manager.io/v1"`) {
		t.Fatalf("without cert-manager's CRDs, want the Certificates refused:\n%s", r.Stderr)
	}
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		t.Fatalf("locating the cert-manager module: %v", err)
	}
	for _, crd := range []string{"certificates", "issuers"} {
		file := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds", "cert-manager.io_"+crd+".yaml")
		cluster.DeleteOnCleanup(t, "-f", file)
		mustKubectl(t, "", "apply", "--server-side", "-f", file)
		waitEstablished(t, crd+".cert-manager.io")
	}
	var last string
	eventually(t, 15*time.Second, func() bool {
		r = kubectl(t, manifests, "apply", "--dry-run=server", "-f", "-")
		last = r.Stdout + r.Stderr
		return r.Err == nil
	}, func() string { return last })
	for _, obj := range []string{"issuer.cert-manager.io/dsguard-selfsigned", "certificate.cert-manager.io/dsguard-ca",
		"issuer.cert-manager.io/dsguard-ca", "certificate.cert-manager.io/dsguard-tls"} {
		if !strings.Contains(r.Stdout, obj+" created (server dry run)") {
			t.Errorf("want %s accepted:\n%s", obj, r.Stdout)
		}
	}
	if strings.Count(r.Stdout, "(server dry run)") != kinds(manifests) {
		t.Errorf("want every object accepted:\n%s", r.Stdout)
	}
}

// prometheusOperatorCRD returns the path of a CRD (by its plural, e.g.
// servicemonitors) as the Prometheus Operator publishes it, from its Go module
// (the module proxy, then the module cache), not from anywhere else.
func prometheusOperatorCRD(t *testing.T, plural string) string {
	t.Helper()
	const module = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
	cmd := exec.CommandContext(t.Context(), "go", "mod", "download", "-json", module)
	cmd.Dir = t.TempDir() // outside dsguard's module: go.mod and go.sum stay untouched
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", module, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", module, err, info.Error)
	}
	return filepath.Join(info.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+plural+".yaml")
}

// notesManifest extracts the smoke-test DaemonSet from the notes helm
// prints after install: the lines between `cat <<'YAML'` and `YAML`.
func notesManifest(t *testing.T, helmOutput string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)cat <<'YAML' \| kubectl apply --dry-run=server -f -\n(.*?)\n\s*YAML\n`).FindStringSubmatch(helmOutput)
	if m == nil {
		t.Fatalf("the install notes lack the smoke test:\n%s", helmOutput)
	}
	lines := strings.Split(m[1], "\n")
	indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
	for i, l := range lines {
		if len(l) >= indent {
			lines[i] = l[indent:]
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestHelmInstall_WebhookRejectsAndWarns installs the whole chart with Helm 3
// and with Helm 4, pointed at the dsguard this package started, and drives
// kubectl through the webhook configuration helm installed: denies, warnings,
// the notes' smoke test, a policy changed by `helm upgrade`, a broken policy
// refused, and an uninstall that leaves no webhook behind.
func TestHelmInstall_WebhookRejectsAndWarns(t *testing.T) {
	// framework.Start applied the webhook configuration and the policy with
	// kubectl, and the dsguard it started wrote its last-good record (the
	// chart creates that record in a cluster); helm must own them now.
	withoutSuiteWebhook(t)
	mustKubectl(t, "", "delete", "configmap", "dsguard-policy", "-n", namespace, "--ignore-not-found")

	for _, h := range helms() {
		t.Run(h.name, func(t *testing.T) {
			// Deleted before each install: the dsguard running outside the
			// chart writes the record again whenever it loads a policy.
			mustKubectl(t, "", "delete", "configmap", "dsguard-policy-last-good", "-n", namespace, "--ignore-not-found")
			r := helm(t, h, "install", "dsguard", "charts/dsguard", "--namespace", namespace, "--set", "tls.mode=file",
				"--set", "webhook.url="+cluster.WebhookURL, "--set", "webhook.caBundle="+caBundle)
			if r.Err != nil {
				t.Fatal(r.Error())
			}
			installed := true
			t.Cleanup(func() {
				if installed {
					uninstall(t, h, "dsguard", namespace)
				}
			})
			installOut := r.Stdout
			if !strings.Contains(r.Stdout, "STATUS: deployed") {
				t.Errorf("helm install did not report deployed:\n%s", r.Stdout)
			}

			vwc := getJSON(t, "validatingwebhookconfiguration", "dsguard")
			if field(vwc, "metadata", "labels", "app.kubernetes.io/managed-by") != "Helm" ||
				field(vwc, "metadata", "annotations", "meta.helm.sh/release-name") != "dsguard" {
				t.Errorf("the webhook configuration is not helm's: %v", field(vwc, "metadata"))
			}
			if got := field(vwc, "webhooks", 0, "clientConfig", "url"); got != cluster.WebhookURL+"/validate-daemonset" {
				t.Errorf("clientConfig.url = %v, want %s/validate-daemonset", got, cluster.WebhookURL)
			}

			// Denied: node-exporter without the control-plane toleration.
			nodeExporter := example(t, "node-exporter.yaml")
			var last framework.Result
			took := eventually(t, 30*time.Second, func() bool {
				last = kubectl(t, nodeExporter, "apply", "--dry-run=server", "-f", "-")
				return denied(last, dsWebhook, cpDenied)
			}, func() string { return last.Stderr })
			t.Logf("the helm-installed webhook configuration answered after %s", took)
			if r := kubectl(t, nodeExporter, "apply", "-f", "-"); !denied(r, dsWebhook, cpDenied) {
				t.Errorf("a real apply is not denied:\n%s", r.Stderr)
			}

			// Warned: maxUnavailable 50% is admitted with a warning.
			r = kubectl(t, example(t, "log-shipper-half-fleet.yaml"), "apply", "--dry-run=server", "-f", "-")
			if r.ExitCode != 0 || !strings.Contains(r.Stderr, "Warning: max-unavailable: ") {
				t.Errorf("want log-shipper admitted with a max-unavailable warning:\n%s", r.Stderr)
			}

			// The smoke test the notes tell the operator to run is denied.
			if r := kubectl(t, notesManifest(t, installOut), "apply", "--dry-run=server", "-f", "-"); !denied(r, dsWebhook, "[surge-host-port]") {
				t.Errorf("the notes' smoke test is not denied by surge-host-port:\n%s", r.Stderr)
			}

			if h.name == "helm3" {
				upgradePolicy(t, h, nodeExporter)
			}

			if r := uninstall(t, h, "dsguard", namespace); r.Err != nil {
				t.Fatal(r.Error())
			}
			installed = false
			for _, obj := range [][]string{{"validatingwebhookconfiguration", "dsguard"}, {"configmap", "dsguard-policy", "-n", namespace}} {
				if r := kubectl(t, "", append([]string{"get"}, obj...)...); !strings.Contains(r.Stderr, "NotFound") {
					t.Errorf("%v is left after helm uninstall", obj)
				}
			}
			if r := kubectl(t, nodeExporter, "apply", "--dry-run=server", "-f", "-"); r.ExitCode != 0 || strings.Contains(r.Stderr, "Warning") {
				t.Errorf("after uninstall dsguard must not be called:\n%s", r.Stderr)
			}
		})
	}
}

// upgradePolicy changes the policy through the chart: enforcement warn turns
// the deny into a warning once dsguard reloads, and a policy dsguard refuses
// makes `helm upgrade` fail at the policy webhook.
func upgradePolicy(t *testing.T, h helmBin, nodeExporter string) {
	t.Helper()
	if r := helm(t, h, "upgrade", "dsguard", "charts/dsguard", "--namespace", namespace, "--reuse-values",
		"--set", "policy.enforcement=warn"); r.Err != nil {
		t.Fatal(r.Error())
	}
	var last framework.Result
	took := eventually(t, 30*time.Second, func() bool {
		last = kubectl(t, nodeExporter, "apply", "--dry-run=server", "-f", "-")
		return last.ExitCode == 0 && strings.Contains(last.Stderr, "Warning: control-plane-toleration")
	}, func() string { return last.Stderr })
	t.Logf("helm upgrade to enforcement warn took effect after %s", took)

	// A namespace glob that does not compile: the schema cannot tell, dsguard can.
	broken := filepath.Join(t.TempDir(), "broken-policy.yaml")
	writeFile(t, broken, "policy:\n  namespaceEnforcement:\n    - namespaces: [\"[unclosed\"]\n      enforcement: warn\n")
	r := helm(t, h, "upgrade", "dsguard", "charts/dsguard", "--namespace", namespace, "--reuse-values", "--values", broken)
	if r.Err == nil || !strings.Contains(r.Stderr, `admission webhook "policy.dsguard.io" denied the request`) ||
		!strings.Contains(r.Stderr, "not a valid glob") {
		t.Errorf("want the broken policy refused by policy.dsguard.io:\n%s", r.Stderr)
	}
}
