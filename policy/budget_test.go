package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
)

func TestEnv_DescribeSkip(t *testing.T) {
	skip := func(names ...string) coverage.Skip {
		return coverage.Skip{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}.WithNodes(names...)
	}
	tests := []struct {
		name  string
		skip  coverage.Skip
		limit int
		hide  bool
		want  string
	}{
		{"one node", skip("n-1"), 3, false, "taint gpu:NoSchedule not tolerated (n-1)"},
		{"as many as the limit", skip("n-1", "n-2", "n-3"), 3, false, "taint gpu:NoSchedule not tolerated (n-1, n-2, n-3)"},
		{"more than the limit", skip("n-1", "n-2", "n-3", "n-4", "n-5"), 3, false,
			"taint gpu:NoSchedule not tolerated (n-1, n-2, n-3 and 2 more)"},
		{"names hidden, one", skip("n-1"), 3, true, "taint gpu:NoSchedule not tolerated (1 node)"},
		{"names hidden, several", skip("n-1", "n-2", "n-3", "n-4"), 3, true, "taint gpu:NoSchedule not tolerated (4 nodes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := policy.Env{HideNodeNames: tt.hide}
			if got := env.DescribeSkip(tt.skip, tt.limit); got != tt.want {
				t.Errorf("DescribeSkip = %q, want %q", got, tt.want)
			}
		})
	}
}
