package vap

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/policy/rules"
)

// TestRender_HostPathMessageReadsAFixedNumberOfItems checks the
// host-path-read-only message both ways: it names the first offending
// container and mount among the first rules.HostPathMessageItems, and past them
// it still denies, with a message that says how far it read.
func TestRender_HostPathMessageReadsAFixedNumberOfItems(t *testing.T) {
	handler, policies := ruleAlone(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  host-path-read-only: {action: deny}\n", "host-path-read-only")
	daemonSet := func(containers, offender int) *appsv1.DaemonSet {
		spec := corev1.PodSpec{Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}}}
		for i := range containers {
			c := corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "agent:v1",
				VolumeMounts: []corev1.VolumeMount{{Name: "host", MountPath: "/host", ReadOnly: i != offender}}}
			spec.Containers = append(spec.Containers, c)
		}
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
	}
	for _, tc := range []struct {
		name                 string
		containers, offender int
		wantInMessage        string
	}{
		{"the first container", 1, 0, `container "c0" mounts hostPath /var/log writable`},
		{"the last container read", rules.HostPathMessageItems, rules.HostPathMessageItems - 1, fmt.Sprintf(`container "c%d" mounts hostPath /var/log writable`, rules.HostPathMessageItems-1)},
		{"past the containers read", rules.HostPathMessageItems + 1, rules.HostPathMessageItems, fmt.Sprintf("reads the first %d containers", rules.HostPathMessageItems)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request{namespace: "fixtures", object: daemonSet(tc.containers, tc.offender)}
			if got, msgs := webhookVerdict(t, handler, r); got != "deny" {
				t.Fatalf("webhook: %s %q, want deny", got, msgs)
			}
			got, msgs := admit(t, policies, r)
			if got != "deny" || len(msgs) != 1 || !strings.Contains(msgs[0], tc.wantInMessage) {
				t.Errorf("generated policy: %s %q, want deny with %q", got, msgs, tc.wantInMessage)
			}
		})
	}
}
