package policy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
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
		{name: "RollingUpdate", ds: newDS()},
		{name: "type unset (defaults to RollingUpdate)", ds: newDS(withStrategyType(""), withoutRollingUpdate)},
		{name: "type unset with rollingUpdate", ds: newDS(withStrategyType(""))},
		{name: "OnDelete", ds: newDS(withStrategyType(appsv1.OnDeleteDaemonSetStrategyType), withoutRollingUpdate),
			want: onDelete},
		{name: "OnDelete ignores a leftover rollingUpdate", ds: newDS(withStrategyType(appsv1.OnDeleteDaemonSetStrategyType)),
			want: onDelete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkUpdateStrategy(tt.ds, testEnv(), &NoParams{}), tt.want)
		})
	}
}
