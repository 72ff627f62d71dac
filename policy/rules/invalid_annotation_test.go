package rules

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

const (
	exemptCP         = policy.ExemptionAnnotationPrefix + controlPlaneTolerationID
	exemptPrivileged = policy.ExemptionAnnotationPrefix + privilegedID
)

func annotationField(key string) string { return "metadata.annotations[" + key + "]" }

func TestCheckInvalidAnnotation(t *testing.T) {
	noPrivilegedExemptions := Builtin().DefaultConfig()
	policy.RuleConfigOf[policy.NoParams](noPrivilegedExemptions, privilegedID).AllowExemptions = new(false)
	forbidding, err := policy.Compile(noPrivilegedExemptions)
	if err != nil {
		t.Fatal(err)
	}
	one := func(key, msg string) []wantFinding {
		return []wantFinding{{field: annotationField(key), msg: []string{msg}}}
	}

	tests := []struct {
		name        string
		annotations map[string]string
		policy      *policy.Policy // nil: the default
		want        []wantFinding
	}{
		{name: "no annotations"},
		{name: "unrelated annotations", annotations: map[string]string{
			"deprecated.daemonset.template.generation": "3",
			"example.com/exempt":                       "",
			"exempt.dsguard.io":                        "",
		}},
		{name: "valid exemption", annotations: map[string]string{exemptPrivileged: "the CNI installer writes iptables rules"}},
		{name: "valid exemption with a future expiry", annotations: map[string]string{exemptPrivileged: "vendor fix pending; expires=2026-12-31"}},
		{name: "exemption valid through its expiry day", annotations: map[string]string{exemptPrivileged: "vendor fix pending; expires=2026-06-01"}},
		{name: "valid intended coverage", annotations: map[string]string{policy.IntendedCoverageAnnotation: "GPU nodes only"}},
		{name: "unknown rule", annotations: map[string]string{policy.ExemptionAnnotationPrefix + "no-such-rule": "because"},
			want: one(policy.ExemptionAnnotationPrefix+"no-such-rule", `exemption names unknown rule "no-such-rule", so it exempts nothing`)},
		{name: "misspelt rule", annotations: map[string]string{policy.ExemptionAnnotationPrefix + "privileges": "because"},
			want: one(policy.ExemptionAnnotationPrefix+"privileges", `unknown rule "privileges"`)},
		{name: "empty reason", annotations: map[string]string{exemptPrivileged: ""},
			want: one(exemptPrivileged, "exemption from privileged is ignored: the reason is empty")},
		{name: "blank reason", annotations: map[string]string{exemptPrivileged: "   "},
			want: one(exemptPrivileged, "the reason is empty")},
		{name: "expiry without a reason", annotations: map[string]string{exemptPrivileged: "; expires=2099-01-01"},
			want: one(exemptPrivileged, "the reason is empty")},
		{name: "expired", annotations: map[string]string{exemptPrivileged: "legacy agent; expires=2020-01-01"},
			want: one(exemptPrivileged, "exemption from privileged expired on 2020-01-01 and no longer applies")},
		{name: "expired yesterday", annotations: map[string]string{exemptPrivileged: "legacy agent; expires=2026-05-31"},
			want: one(exemptPrivileged, "expired on 2026-05-31")},
		{name: "malformed date", annotations: map[string]string{exemptPrivileged: "legacy agent; expires=2026-13-01"},
			want: one(exemptPrivileged, `exemption from privileged is ignored: expiry "2026-13-01" is not a date in the form YYYY-MM-DD`)},
		{name: "date in another format", annotations: map[string]string{exemptPrivileged: "legacy agent; expires=01/06/2026"},
			want: one(exemptPrivileged, `expiry "01/06/2026" is not a date`)},
		{name: "policy forbids exemptions from the rule", policy: forbidding,
			annotations: map[string]string{exemptPrivileged: "the CNI installer writes iptables rules"},
			want:        one(exemptPrivileged, "the policy forbids exemptions from privileged, so this one is ignored")},
		{name: "other rules stay exemptible when one is forbidden", policy: forbidding,
			annotations: map[string]string{exemptCP: "workers only; expires=2026-07-01"}},
		{name: "an exemption from a deny rule without expiry", annotations: map[string]string{exemptCP: "workers only"},
			want: one(exemptCP, "exemption from deny rule control-plane-toleration has no expiry, so it is void")},
		{name: "an exemption from a deny rule ending too late", annotations: map[string]string{exemptCP: "workers only; expires=2027-01-01"},
			want: one(exemptCP, "expires on 2027-01-01, more than 90 days away, so it is void: the latest allowed expiry is 2026-08-30")},
		{name: "non-exemptible rule", annotations: map[string]string{policy.ExemptionAnnotationPrefix + invalidAnnotationID: "noise"},
			want: one(policy.ExemptionAnnotationPrefix+invalidAnnotationID, "rule invalid-annotation cannot be exempted")},
		{name: "empty intended coverage", annotations: map[string]string{policy.IntendedCoverageAnnotation: ""},
			want: one(policy.IntendedCoverageAnnotation, "intended-coverage annotation has no reason, so it is ignored")},
		{name: "blank intended coverage", annotations: map[string]string{policy.IntendedCoverageAnnotation: " \t"},
			want: one(policy.IntendedCoverageAnnotation, "has no reason")},
		{name: "several, sorted by field path", annotations: map[string]string{
			policy.IntendedCoverageAnnotation:                   "",
			policy.ExemptionAnnotationPrefix + "zzz":            "x",
			exemptPrivileged:                                    "",
			exemptCP:                                            "old; expires=2021-02-03",
			policy.ExemptionAnnotationPrefix + "aaa":            "x",
			policy.ExemptionAnnotationPrefix + readinessProbeID: "fine",
		}, want: []wantFinding{
			{field: annotationField(policy.IntendedCoverageAnnotation), msg: []string{"intended-coverage annotation has no reason"}},
			{field: annotationField(policy.ExemptionAnnotationPrefix + "aaa"), msg: []string{`unknown rule "aaa"`}},
			{field: annotationField(exemptCP), msg: []string{"expired on 2021-02-03"}},
			{field: annotationField(exemptPrivileged), msg: []string{"the reason is empty"}},
			{field: annotationField(policy.ExemptionAnnotationPrefix + "zzz"), msg: []string{`unknown rule "zzz"`}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testEnv()
			if tt.policy != nil {
				env.Policy = tt.policy
			}
			ds := testobj.DS(func(ds *appsv1.DaemonSet) { ds.Annotations = tt.annotations })
			// Map iteration order varies from run to run; the findings must not.
			for range 20 {
				assertFindings(t, checkInvalidAnnotation(ds, env, &policy.NoParams{}), tt.want)
				if t.Failed() {
					return
				}
			}
		})
	}
}

// TestEvaluate_Exemptions checks exemptions end to end: a valid one turns the
// rule's findings into audit records, an invalid one leaves them standing and
// is reported itself.
func TestEvaluate_Exemptions(t *testing.T) {
	noCPExemptions := Builtin().DefaultConfig()
	policy.RuleConfigOf[ControlPlaneTolerationParams](noCPExemptions, controlPlaneTolerationID).AllowExemptions = new(false)
	forbidding, err := policy.Compile(noCPExemptions)
	if err != nil {
		t.Fatal(err)
	}
	const reason = "the provider scrapes the managed control plane"
	tests := []struct {
		name         string
		value        string
		policy       *policy.Policy
		wantAction   policy.Action
		wantExempted string
		wantInvalid  string // fragment of the invalid-annotation message, "" for none
	}{
		{name: "without expiry: void", value: reason, wantAction: policy.ActionDeny, wantInvalid: "has no expiry, so it is void"},
		{name: "valid until a day within 90 days", value: reason + "; expires=2026-08-30", wantAction: policy.ActionAudit, wantExempted: reason},
		{name: "until a day past 90 days: void", value: reason + "; expires=2026-08-31", wantAction: policy.ActionDeny, wantInvalid: "more than 90 days away"},
		{name: "expired", value: reason + "; expires=2026-01-31", wantAction: policy.ActionDeny, wantInvalid: "expired on 2026-01-31"},
		{name: "empty reason", value: "; expires=2026-12-31", wantAction: policy.ActionDeny, wantInvalid: "the reason is empty"},
		{name: "malformed expiry", value: reason + "; expires=soon", wantAction: policy.ActionDeny, wantInvalid: `expiry "soon"`},
		{name: "forbidden by the policy", value: reason, policy: forbidding, wantAction: policy.ActionDeny, wantInvalid: "the policy forbids"},
	}
	for _, tt := range tests {
		if tt.policy == nil {
			tt.policy = Builtin().Default()
		}
		t.Run(tt.name, func(t *testing.T) {
			ds := testobj.DS(testobj.WithTolerations(), testobj.WithAnnotation(exemptCP, tt.value))
			fs := policy.Evaluate(ds, policy.Env{Policy: tt.policy, Now: testobj.Now})

			cp := findingsOf(fs, controlPlaneTolerationID)
			if len(cp) != 1 {
				t.Fatalf("want one %s finding, got:\n%s", controlPlaneTolerationID, describeFindings(fs))
			}
			if cp[0].Action != tt.wantAction || cp[0].Exempted != tt.wantExempted {
				t.Errorf("%s finding: action %q exempted %q, want %q %q",
					controlPlaneTolerationID, cp[0].Action, cp[0].Exempted, tt.wantAction, tt.wantExempted)
			}

			invalid := findingsOf(fs, invalidAnnotationID)
			if tt.wantInvalid == "" {
				if len(invalid) > 0 {
					t.Errorf("unexpected %s findings:\n%s", invalidAnnotationID, describeFindings(invalid))
				}
				return
			}
			assertFindings(t, invalid, []wantFinding{{field: annotationField(exemptCP), action: policy.ActionWarn, msg: []string{tt.wantInvalid}}})
			if invalid[0].Exempted != "" {
				t.Errorf("%s finding is marked exempted: %q", invalidAnnotationID, invalid[0].Exempted)
			}
		})
	}

	t.Run("exemption covers every finding of its rule only", func(t *testing.T) {
		ds := testobj.DS(
			testobj.WithAnnotation(exemptPrivileged, "the CNI installer writes iptables rules"),
			testobj.WithAgent(func(c *corev1.Container) {
				c.SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
				c.Image = "example/agent"
			}),
			testobj.WithInitContainer(corev1.Container{Name: "install", Image: "example/install:v1",
				SecurityContext: &corev1.SecurityContext{Privileged: new(true)}}),
		)
		fs := policy.Evaluate(ds, policy.Env{Policy: Builtin().Default(), Now: testobj.Now})
		priv := findingsOf(fs, privilegedID)
		if len(priv) != 2 {
			t.Fatalf("want two %s findings, got:\n%s", privilegedID, describeFindings(fs))
		}
		for _, f := range priv {
			if f.Action != policy.ActionAudit || f.Exempted != "the CNI installer writes iptables rules" {
				t.Errorf("%s %s: action %q exempted %q, want audit with the reason", f.RuleID, f.FieldString(), f.Action, f.Exempted)
			}
		}
		img := findingsOf(fs, imagePinnedID)
		if len(img) != 1 || img[0].Action != policy.ActionWarn || img[0].Exempted != "" {
			t.Errorf("image-pinned should be untouched by another rule's exemption:\n%s", describeFindings(img))
		}
	})

	t.Run("invalid-annotation cannot exempt itself", func(t *testing.T) {
		ds := testobj.DS(testobj.WithAnnotation(policy.ExemptionAnnotationPrefix+invalidAnnotationID, "quiet please"))
		fs := findingsOf(policy.Evaluate(ds, policy.Env{Policy: Builtin().Default(), Now: testobj.Now}), invalidAnnotationID)
		if len(fs) != 1 || fs[0].Action != policy.ActionWarn || fs[0].Exempted != "" {
			t.Errorf("want one unexempted warn, got:\n%s", describeFindings(fs))
		}
	})
}
