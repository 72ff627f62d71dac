package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// manifest reads an example and applies text replacements (old, new, ...),
// e.g. to give a DaemonSet a fresh name per scenario.
func manifest(t *testing.T, example string, replacements ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.Root, "examples", example))
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(replacements...).Replace(string(data))
}

// renamed gives the DaemonSet of an example a new metadata.name.
func renamed(t *testing.T, example, from, to string) string {
	return manifest(t, example, "\n  name: "+from+"\n", "\n  name: "+to+"\n")
}

func kubectl(t *testing.T, stdin string, args ...string) framework.Result {
	t.Helper()
	r := cluster.Kubectl(t.Context(), stdin, args...)
	t.Logf("$ %s\n%s%s", r.Command, r.Stdout, r.Stderr)
	return r
}

func wantDenied(t *testing.T, r framework.Result, webhook string, fragments ...string) {
	t.Helper()
	if r.ExitCode != 1 {
		t.Errorf("exit code = %d, want 1 (rejected)", r.ExitCode)
	}
	want := append([]string{"admission webhook \"" + webhook + "\" denied the request: "}, fragments...)
	for _, w := range want {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("kubectl's error lacks %q:\n%s", w, r.Stderr)
		}
	}
}

func wantAllowed(t *testing.T, r framework.Result, stdout string, warnings ...string) {
	t.Helper()
	if r.ExitCode != 0 {
		t.Fatalf("exit code = %d, want 0:\n%s", r.ExitCode, r.Stderr)
	}
	if !strings.Contains(r.Stdout, stdout) {
		t.Errorf("stdout lacks %q:\n%s", stdout, r.Stdout)
	}
	var got []string
	for _, line := range strings.Split(r.Stderr, "\n") {
		if strings.HasPrefix(line, "Warning: ") {
			got = append(got, line)
		}
	}
	if len(got) != len(warnings) {
		t.Errorf("warnings = %q, want %d matching %q", got, len(warnings), warnings)
		return
	}
	for i, w := range warnings {
		if !strings.HasPrefix(got[i], "Warning: "+w) {
			t.Errorf("warning %d = %q, want it to start with %q", i, got[i], "Warning: "+w)
		}
	}
}

const (
	cpDenied = "DaemonSet monitoring/node-exporter breaks 1 dsguard coverage rule:\n" +
		"[control-plane-toleration] spec.template.spec.tolerations: no toleration for " +
		"node-role.kubernetes.io/control-plane:NoSchedule"
	cpFix     = "fix: add to spec.template.spec.tolerations: {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}"
	surgeDeny = "[surge-host-port] spec.updateStrategy.rollingUpdate.maxSurge: maxSurge 1 with port 9100 under hostNetwork (container \"node-exporter\")"
	halfWarn  = "max-unavailable: maxUnavailable 50% is above the 25% cap"
	cpWarning = "control-plane-toleration: no toleration for node-role.kubernetes.io/control-plane:NoSchedule"
	dsWebhook = "daemonsets.dsguard.io"
)

// The scenarios share one cluster and run in any order: each names its
// objects, deletes what it created when it ends (also what a regression
// let through), and puts the default policy back after changing it.

func TestNodeExporterWithoutTolerations_IsRejected(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "node-exporter")
	r := kubectl(t, "", "apply", "-f", "examples/node-exporter.yaml")
	wantDenied(t, r, dsWebhook, `error when creating "examples/node-exporter.yaml"`, cpDenied, cpFix)
	if g := kubectl(t, "", "get", "daemonset", "-n", "monitoring", "node-exporter"); g.ExitCode == 0 {
		t.Error("the rejected DaemonSet exists")
	}
}

func TestNodeExporterWithTolerations_IsCreated(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "node-exporter")
	r := kubectl(t, "", "apply", "-f", "examples/node-exporter-tolerations.yaml")
	wantAllowed(t, r, "daemonset.apps/node-exporter created")
}

func TestMaxSurgeWithHostPort_IsRejected(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "node-exporter-surge")
	r := kubectl(t, "", "apply", "-f", "examples/node-exporter-surge.yaml")
	wantDenied(t, r, dsWebhook, "DaemonSet monitoring/node-exporter-surge breaks 1 dsguard coverage rule", surgeDeny)
}

func TestMaxUnavailableHalfFleet_IsCreatedWithWarning(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "logging", "log-shipper")
	r := kubectl(t, "", "apply", "-f", "examples/log-shipper-half-fleet.yaml")
	wantAllowed(t, r, "daemonset.apps/log-shipper created", halfWarn)
}

// TestApplyModes_GiveIdenticalVerdicts: server-side dry-run and server-side
// apply reach dsguard like a plain apply and get the same verdict.
func TestApplyModes_GiveIdenticalVerdicts(t *testing.T) {
	modes := map[string][]string{
		"dry-run-server":     {"apply", "--dry-run=server", "-f", "-"},
		"server-side":        {"apply", "--server-side", "-f", "-"},
		"server-side-dryrun": {"apply", "--server-side", "--dry-run=server", "-f", "-"},
		"create":             {"create", "-f", "-"},
	}
	for mode, args := range modes {
		t.Run(mode, func(t *testing.T) {
			cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "ne-"+mode, "surge-"+mode)
			cluster.DeleteOnCleanup(t, "daemonset", "-n", "logging", "ls-"+mode)
			r := kubectl(t, renamed(t, "node-exporter.yaml", "node-exporter", "ne-"+mode), args...)
			wantDenied(t, r, dsWebhook, "DaemonSet monitoring/ne-"+mode+" breaks 1 dsguard coverage rule",
				"[control-plane-toleration] spec.template.spec.tolerations")

			r = kubectl(t, renamed(t, "node-exporter-surge.yaml", "node-exporter-surge", "surge-"+mode), args...)
			wantDenied(t, r, dsWebhook, "[surge-host-port] spec.updateStrategy.rollingUpdate.maxSurge")

			r = kubectl(t, renamed(t, "log-shipper-half-fleet.yaml", "log-shipper", "ls-"+mode), args...)
			wantAllowed(t, r, "daemonset.apps/ls-"+mode, halfWarn)
		})
	}
}

func TestKubeSystem_OnlyWarns(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "kube-system", "node-exporter")
	ds := manifest(t, "node-exporter.yaml", "namespace: monitoring", "namespace: kube-system")
	r := kubectl(t, ds, "apply", "-f", "-")
	wantAllowed(t, r, "daemonset.apps/node-exporter created", cpWarning)
}

func TestOwnNamespace_IsNeverEvaluated(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", framework.Namespace, "node-exporter")
	ds := manifest(t, "node-exporter.yaml", "namespace: monitoring", "namespace: "+framework.Namespace)
	r := kubectl(t, ds, "apply", "-f", "-")
	wantAllowed(t, r, "daemonset.apps/node-exporter created")
}

func policyConfigMap(policy string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dsguard-policy\n  namespace: " + framework.Namespace +
		"\n  labels:\n    dsguard.io/policy: \"true\"\ndata:\n  policy.yaml: |\n")
	for _, line := range strings.Split(strings.TrimRight(policy, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

const (
	cpWarnPolicy = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  control-plane-toleration:\n    action: warn\n"
	defaultPol   = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"
)

// setPolicy applies a policy and waits until dsguard enforces it, returning
// how long that took. The default policy comes back, in force, when the test
// ends.
func setPolicy(t *testing.T, policy string, effective func(framework.Result) bool) time.Duration {
	t.Helper()
	if policy != defaultPol {
		restoreDefaultPolicy(t)
	}
	return applyPolicy(t, t.Context(), policy, effective)
}

// restoreDefaultPolicy puts the default policy back, in force, when the test
// ends, whatever it did to the policy ConfigMap.
func restoreDefaultPolicy(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := framework.CleanupContext(t, time.Minute)
		defer cancel()
		applyPolicy(t, ctx, defaultPol, deniedByDsguard)
	})
}

func applyPolicy(t *testing.T, ctx context.Context, policy string, effective func(framework.Result) bool) time.Duration {
	t.Helper()
	r := framework.Logged(t, cluster.Kubectl(ctx, policyConfigMap(policy), "apply", "-f", "-"))
	if r.ExitCode != 0 {
		t.Fatalf("applying the policy: %s", r.Stderr)
	}
	start := time.Now()
	probe := renamed(t, "node-exporter.yaml", "node-exporter", "policy-probe")
	var last framework.Result
	for time.Since(start) < 20*time.Second {
		if last = cluster.Kubectl(ctx, probe, "apply", "--dry-run=server", "-f", "-"); effective(last) {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("policy not in force 20s after kubectl apply; last verdict on the probe (exit %d):\n%s%s\ndsguard log:\n%s",
		last.ExitCode, last.Stdout, last.Stderr, cluster.DsguardLog())
	return 0
}

func allowedWithWarning(r framework.Result) bool {
	return r.ExitCode == 0 && strings.Contains(r.Stderr, "Warning: "+cpWarning)
}

func deniedByDsguard(r framework.Result) bool {
	return r.ExitCode == 1 && strings.Contains(r.Stderr, "[control-plane-toleration]")
}

// TestPolicyEdit_FlipsDenyToWarn edits the policy ConfigMap and sees the
// next apply follow it, then restores the defaults.
func TestPolicyEdit_FlipsDenyToWarn(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "ne-warn-policy")
	took := setPolicy(t, cpWarnPolicy, allowedWithWarning)
	t.Logf("deny -> warn took effect %s after kubectl apply", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("policy change took %s, want seconds", took)
	}
	r := kubectl(t, renamed(t, "node-exporter.yaml", "node-exporter", "ne-warn-policy"), "apply", "-f", "-")
	wantAllowed(t, r, "daemonset.apps/ne-warn-policy created", cpWarning)

	took = setPolicy(t, defaultPol, deniedByDsguard)
	t.Logf("warn -> deny took effect %s after kubectl apply", took.Round(time.Millisecond))
}

func TestInvalidPolicy_IsRejectedWithItsLine(t *testing.T) {
	// Should a refusal regress, the broken policy must not reach the next test.
	restoreDefaultPolicy(t)
	misspelt := "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  max-unavailable:\n    parameters:\n      maxPercnt: 10\n"
	r := kubectl(t, policyConfigMap(misspelt), "apply", "-f", "-")
	wantInvalidPolicy(t, r,
		`data[policy.yaml]: Invalid value: "line 6": unknown field "maxPercnt"`)

	badAction := "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  privileged:\n    action: block\n"
	r = kubectl(t, policyConfigMap(badAction), "apply", "-f", "-")
	wantInvalidPolicy(t, r, `"line 5, rules.privileged.action": Unsupported value: "block"`)

	// The policy in force is unchanged: node-exporter is still denied.
	probe := renamed(t, "node-exporter.yaml", "node-exporter", "after-invalid")
	if p := kubectl(t, probe, "apply", "--dry-run=server", "-f", "-"); !deniedByDsguard(p) {
		t.Error("after a refused policy, the previous policy must stay in force")
	}
}

// TestUpdateOfNonCompliantDaemonSet_LabelOnly_IsAllowedWithWarning: a
// DaemonSet created while the rule only warned is not blocked later by a
// label change that leaves its spec alone.
func TestUpdateOfNonCompliantDaemonSet_LabelOnly_IsAllowedWithWarning(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "legacy-exporter")
	setPolicy(t, cpWarnPolicy, allowedWithWarning)
	legacy := renamed(t, "node-exporter.yaml", "node-exporter", "legacy-exporter")
	wantAllowed(t, kubectl(t, legacy, "apply", "-f", "-"), "daemonset.apps/legacy-exporter created", cpWarning)
	setPolicy(t, defaultPol, deniedByDsguard)

	r := kubectl(t, "", "label", "daemonset", "-n", "monitoring", "legacy-exporter", "team=observability")
	wantAllowed(t, r, "daemonset.apps/legacy-exporter labeled", cpWarning)
	if !strings.Contains(r.Stderr, "(spec unchanged by this update)") {
		t.Errorf("the warning should say why it is not a deny:\n%s", r.Stderr)
	}

	// A spec change that keeps the old violation is ratcheted to a warning...
	bumped := strings.Replace(legacy, "node-exporter:v1.9.1", "node-exporter:v1.9.2", 1)
	r = kubectl(t, bumped, "apply", "-f", "-")
	wantAllowed(t, r, "daemonset.apps/legacy-exporter configured", cpWarning)
	// ...but a new violation in the same update is denied.
	surged := strings.Replace(bumped, "      maxUnavailable: 1\n", "      maxUnavailable: 0\n      maxSurge: 1\n", 1)
	r = kubectl(t, surged, "apply", "-f", "-")
	wantDenied(t, r, dsWebhook, "[surge-host-port]")
}

// wantInvalidPolicy checks a refused policy ConfigMap. dsguard answers with
// an Invalid status, which the API server passes through as it is, so
// kubectl prints it like its own validation errors.
func wantInvalidPolicy(t *testing.T, r framework.Result, fragments ...string) {
	t.Helper()
	if r.ExitCode != 1 {
		t.Errorf("exit code = %d, want 1 (rejected)", r.ExitCode)
	}
	for _, w := range append([]string{`The ConfigMap "dsguard-policy" is invalid: data[policy.yaml]: Invalid value: "line `}, fragments...) {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("kubectl's error lacks %q:\n%s", w, r.Stderr)
		}
	}
}
