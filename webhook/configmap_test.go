package webhook

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/clusterview"
)

func TestPolicyConfigMapValidator(t *testing.T) {
	v := &PolicyConfigMapValidator{Ref: clusterview.PolicyRef{Namespace: ownNamespace, Name: "dsguard-policy", Key: "policy.yaml"}}
	cm := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ownNamespace, Name: name}, Data: data}
	}
	tests := []struct {
		name    string
		cm      *corev1.ConfigMap
		wantErr []string // substrings of the error; nil means allowed
	}{
		{"valid policy", cm("dsguard-policy", map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nenforcement: warn\n"}), nil},
		{"other ConfigMap is ignored", cm("unrelated", map[string]string{"policy.yaml": "garbage: ["}), nil},
		{"missing key", cm("dsguard-policy", map[string]string{"other": "x"}), []string{`data[policy.yaml]: Required value`}},
		{
			"misspelt key names its line",
			cm("dsguard-policy", map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  max-unavailable:\n    parameters:\n      maxPercnt: 10\n"}),
			[]string{`ConfigMap "dsguard-policy" is invalid`, `data[policy.yaml]: Invalid value: "line 6": unknown field "maxPercnt"`},
		},
		{
			"invalid action names its line and field",
			cm("dsguard-policy", map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  privileged:\n    action: block\n"}),
			[]string{`Invalid value: "line 5, rules.privileged.action": Unsupported value: "block"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for op, validate := range map[string]func() error{
				"create": func() error { _, err := v.ValidateCreate(t.Context(), tt.cm); return err },
				"update": func() error { _, err := v.ValidateUpdate(t.Context(), cm("dsguard-policy", nil), tt.cm); return err },
			} {
				err := validate()
				if tt.wantErr == nil {
					if err != nil {
						t.Errorf("%s: unexpected error %v", op, err)
					}
					continue
				}
				if err == nil || !apierrors.IsInvalid(err) {
					t.Fatalf("%s: want an Invalid error, got %v", op, err)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: error %q lacks %q", op, err.Error(), want)
					}
				}
			}
		})
	}
	w, err := v.ValidateDelete(t.Context(), cm("dsguard-policy", nil))
	if err != nil || len(w) != 1 || !strings.Contains(w[0], "keeps enforcing the last good policy") {
		t.Errorf("delete: warnings %v, err %v", w, err)
	}
	// A weaker policy is admitted with a warning per weakness.
	weak := cm("dsguard-policy", map[string]string{"policy.yaml": "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n" +
		"enforcement: audit\nbypass: {groups: [system:authenticated]}\n"})
	w, err = v.ValidateUpdate(t.Context(), weak, weak)
	if err != nil || len(w) != 2 || !strings.Contains(w[0], "enforcement is audit") || !strings.Contains(w[1], "system:authenticated") {
		t.Errorf("weak policy: warnings %q, err %v", w, err)
	}

}

func TestPolicyConfigMapValidator_UpdateThatLowersEnforcement(t *testing.T) {
	v := &PolicyConfigMapValidator{Ref: clusterview.PolicyRef{Namespace: ownNamespace, Name: "dsguard-policy", Key: "policy.yaml"}}
	const header = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"
	cm := func(doc string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ownNamespace, Name: "dsguard-policy"},
			Data: map[string]string{"policy.yaml": doc}}
	}
	const lowers = "dsguard: this policy change lowers enforcement: "
	tests := []struct {
		name     string
		old, new *corev1.ConfigMap
		want     []string // the warnings, each starting so
	}{
		{"a deny rule turned to warn", cm(header), cm(header + "rules:\n  surge-host-port: {action: warn}\n"),
			// The baseline's warning, then the change's.
			[]string{"dsguard: this policy is weaker than the baseline: deny rules lowered: surge-host-port is warn",
				lowers + "rules.surge-host-port.action deny → warn: a DaemonSet that fails"}},
		{"the same again", cm(header + "rules:\n  surge-host-port: {action: warn}\n"), cm(header + "rules:\n  surge-host-port: {action: warn}\n"),
			[]string{"dsguard: this policy is weaker than the baseline: deny rules lowered: surge-host-port is warn"}},
		{"a bypass user and a warn rule off", cm(header), cm(header + "bypass: {users: [alice]}\nrules:\n  privileged: {action: \"off\"}\n"),
			[]string{lowers + "bypass.users adds alice", lowers + "rules.privileged.action warn → off"}},
		{"a strengthening", cm(header + "enforcement: warn\n"), cm(header),
			nil},
		{"the old document invalid", cm("garbage: ["), cm(header + "rules:\n  privileged: {action: audit}\n"), nil},
		{"the old ConfigMap without the key", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ownNamespace, Name: "dsguard-policy"}},
			cm(header + "rules:\n  privileged: {action: audit}\n"), nil},
		{"the old ConfigMap absent", nil, cm(header + "rules:\n  privileged: {action: audit}\n"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := v.ValidateUpdate(t.Context(), tt.old, tt.new)
			if err != nil {
				t.Fatal(err)
			}
			if len(w) != len(tt.want) {
				t.Fatalf("warnings %q, want %d starting %q", w, len(tt.want), tt.want)
			}
			for i := range w {
				if !strings.HasPrefix(w[i], tt.want[i]) || strings.Contains(w[i], "\n") {
					t.Errorf("warning %d = %q, want one line starting %q", i, w[i], tt.want[i])
				}
			}
		})
	}
}
