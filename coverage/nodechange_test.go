package coverage_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
)

func TestImpactOf(t *testing.T) {
	dedicated := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	evict := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute}
	plain := testobj.Node("infra-4", testobj.NodeLabels("pool", "infra"))
	tainted := testobj.Node("infra-4", testobj.NodeLabels("pool", "infra"), testobj.NodeTaints(dedicated))
	evicting := testobj.Node("infra-4", testobj.NodeLabels("pool", "infra"), testobj.NodeTaints(evict))
	relabelled := testobj.Node("infra-4", testobj.NodeLabels("pool", "general"))
	agent := testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{"pool": "infra"}))
	tolerant := testobj.DS(testobj.WithNodeSelector(map[string]string{"pool": "infra"})) // tolerates everything
	for _, tc := range []struct {
		name          string
		ds            *appsv1.DaemonSet
		before, after *corev1.Node
		hasPod        bool
		want          coverage.Impact
	}{
		{"a NoSchedule taint keeps the running Pod until it restarts", agent, plain, tainted, true, coverage.ImpactLostOnRestart},
		{"a NoSchedule taint where no Pod runs", agent, plain, tainted, false, coverage.ImpactNoLongerPlaced},
		{"a NoExecute taint evicts the Pod now", agent, plain, evicting, true, coverage.ImpactRemoved},
		{"a label its selector needs, removed", agent, plain, relabelled, true, coverage.ImpactRemoved},
		{"the node removed", agent, plain, nil, true, coverage.ImpactRemoved},
		{"the taint lifted: the Pod comes", agent, tainted, plain, false, coverage.ImpactGains},
		{"the taint lifted where the Pod kept running", agent, tainted, plain, true, coverage.ImpactNone},
		{"NoExecute on a node where a Pod kept running evicts it", agent, tainted, evicting, true, coverage.ImpactRemoved},
		{"a tolerated taint changes nothing", tolerant, plain, evicting, true, coverage.ImpactNone},
		{"a node it never selected", agent, relabelled, testobj.Node("infra-4", testobj.NodeLabels("pool", "gpu")), false, coverage.ImpactNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := coverage.ImpactOf(tc.ds, tc.before, tc.after, tc.hasPod); got.Impact != tc.want {
				t.Errorf("impact %q, want %q (decision %+v)", got.Impact, tc.want, got.Decision)
			}
		})
	}
}
