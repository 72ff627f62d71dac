package rules

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

func TestCheckUpdateStrategy(t *testing.T) {
	onDelete := []wantFinding{{field: "spec.updateStrategy.type",
		prefix: "updateStrategy OnDelete: ",
		msg:    []string{"a change reaches a node only when its Pod is deleted by hand"}}}
	tests := []struct {
		name string
		ds   *appsv1.DaemonSet
		want []wantFinding
	}{
		{name: "RollingUpdate", ds: testobj.DS()},
		{name: "type unset (defaults to RollingUpdate)", ds: testobj.DS(testobj.WithStrategyType(""), testobj.WithoutRollingUpdate)},
		{name: "type unset with rollingUpdate", ds: testobj.DS(testobj.WithStrategyType(""))},
		{name: "OnDelete", ds: testobj.DS(testobj.WithStrategyType(appsv1.OnDeleteDaemonSetStrategyType), testobj.WithoutRollingUpdate),
			want: onDelete},
		{name: "OnDelete ignores a leftover rollingUpdate", ds: testobj.DS(testobj.WithStrategyType(appsv1.OnDeleteDaemonSetStrategyType)),
			want: onDelete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkUpdateStrategy(tt.ds, testEnv(), &policy.NoParams{}), tt.want)
		})
	}
}
