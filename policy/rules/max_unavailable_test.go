package rules

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

func TestCheckMaxUnavailable(t *testing.T) {
	const muField = "spec.updateStrategy.rollingUpdate.maxUnavailable"
	defaults := defaultMaxUnavailableParams()
	count2 := MaxUnavailableParams{MaxPercent: 25, MaxCount: 2}
	count1 := MaxUnavailableParams{MaxPercent: 25, MaxCount: 1}
	mu := func(v *intstr.IntOrString) func(*appsv1.DaemonSet) { return testobj.WithRollingUpdate(v, nil) }
	malformed := func(what ...string) []wantFinding { return []wantFinding{{field: muField, msg: what}} }

	tests := []struct {
		name   string
		ds     *appsv1.DaemonSet
		params MaxUnavailableParams
		want   []wantFinding
	}{
		{name: "1 under the defaults", ds: testobj.DS(), params: defaults},
		{name: "rollingUpdate unset is 1", ds: testobj.DS(testobj.WithoutRollingUpdate), params: defaults},
		{name: "maxUnavailable unset is 1", ds: testobj.DS(mu(nil)), params: defaults},
		{name: "unset is a count of 1, within a count cap of 1", ds: testobj.DS(mu(nil)), params: count1},
		{name: "unset is a count, not a percentage", ds: testobj.DS(mu(nil)), params: MaxUnavailableParams{MaxPercent: 0}},
		{name: "unset under the tightest caps", ds: testobj.DS(mu(nil)), params: MaxUnavailableParams{MaxPercent: 0, MaxCount: 1}},
		{name: "explicit 1 under the tightest caps", ds: testobj.DS(mu(testobj.IntOrInt(1))), params: MaxUnavailableParams{MaxPercent: 0, MaxCount: 1}},
		{name: "count above a cap of 1", ds: testobj.DS(mu(testobj.IntOrInt(2))), params: count1,
			want: []wantFinding{{field: muField, prefix: "maxUnavailable 2 is above the cap of 1: a rollout may blind 2 nodes at once"}}},
		{name: "large count without a count cap", ds: testobj.DS(mu(testobj.IntOrInt(50))), params: defaults},
		{name: "count at the cap", ds: testobj.DS(mu(testobj.IntOrInt(2))), params: count2},
		{name: "count above the cap", ds: testobj.DS(mu(testobj.IntOrInt(3))), params: count2,
			want: []wantFinding{{field: muField, msg: []string{"maxUnavailable 3 is above the cap of 2", "a rollout may blind 3 nodes at once"}}}},
		{name: "0 with maxSurge", ds: testobj.DS(testobj.WithRollingUpdate(testobj.IntOrInt(0), testobj.IntOrInt(1))), params: count1},
		{name: "25% at the default cap", ds: testobj.DS(mu(testobj.IntOrString("25%"))), params: defaults},
		{name: "0% with maxSurge", ds: testobj.DS(testobj.WithRollingUpdate(testobj.IntOrString("0%"), testobj.IntOrInt(1))), params: defaults},
		{name: "50% above the default cap", ds: testobj.DS(mu(testobj.IntOrString("50%"))), params: defaults,
			want: []wantFinding{{field: muField, msg: []string{"maxUnavailable 50% is above the 25% cap", "a rollout may blind 50% of the nodes at once"}}}},
		{name: "leading zeros at the cap", ds: testobj.DS(mu(testobj.IntOrString("025%"))), params: defaults},
		{name: "leading zeros above the cap", ds: testobj.DS(mu(testobj.IntOrString("050%"))), params: defaults,
			want: []wantFinding{{field: muField, msg: []string{"maxUnavailable 50% is above the 25% cap"}}}},
		{name: "100%", ds: testobj.DS(mu(testobj.IntOrString("100%"))), params: defaults,
			want: []wantFinding{{field: muField, msg: []string{"maxUnavailable 100% is above the 25% cap", "may blind 100% of the nodes"}}}},
		{name: "percentage above a lower cap", ds: testobj.DS(mu(testobj.IntOrString("25%"))), params: MaxUnavailableParams{MaxPercent: 10},
			want: []wantFinding{{field: muField, msg: []string{"maxUnavailable 25% is above the 10% cap", "may blind 25% of the nodes"}}}},
		{name: "percentage is judged by maxPercent, not maxCount", ds: testobj.DS(mu(testobj.IntOrString("10%"))), params: count1},
		{name: "strategy type unset defaults to RollingUpdate", ds: testobj.DS(mu(testobj.IntOrString("50%")), testobj.WithStrategyType("")), params: defaults,
			want: []wantFinding{{field: muField, msg: []string{"maxUnavailable 50%"}}}},
		{name: "OnDelete", ds: testobj.DS(mu(testobj.IntOrString("100%")), testobj.WithStrategyType(appsv1.OnDeleteDaemonSetStrategyType)), params: defaults},
		{name: "malformed string", ds: testobj.DS(mu(testobj.IntOrString("abc"))), params: defaults,
			want: malformed(`maxUnavailable "abc"`, "neither an integer nor a percentage")},
		{name: "number as a string", ds: testobj.DS(mu(testobj.IntOrString("50"))), params: defaults,
			want: malformed(`maxUnavailable "50"`, "neither an integer nor a percentage")},
		{name: "negative percentage", ds: testobj.DS(mu(testobj.IntOrString("-5%"))), params: defaults,
			want: malformed(`maxUnavailable "-5%"`, "between 0% and 100%")},
		{name: "above 100%", ds: testobj.DS(mu(testobj.IntOrString("101%"))), params: defaults,
			want: malformed(`maxUnavailable "101%"`, "between 0% and 100%")},
		{name: "fractional percentage", ds: testobj.DS(mu(testobj.IntOrString("5.5%"))), params: defaults,
			want: malformed(`maxUnavailable "5.5%"`, "whole-number percentage")},
		{name: "signed percentage", ds: testobj.DS(mu(testobj.IntOrString("+5%"))), params: defaults,
			want: malformed(`maxUnavailable "+5%"`, "whole-number percentage")},
		{name: "space before the number", ds: testobj.DS(mu(testobj.IntOrString(" 5%"))), params: defaults,
			want: malformed(`maxUnavailable " 5%"`, "whole-number percentage")},
		{name: "percent sign only", ds: testobj.DS(mu(testobj.IntOrString("%"))), params: defaults,
			want: malformed(`maxUnavailable "%"`, "whole-number percentage")},
		{name: "negative count", ds: testobj.DS(mu(testobj.IntOrInt(-1))), params: defaults,
			want: malformed("maxUnavailable -1", "must not be negative")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkMaxUnavailable(tt.ds, testEnv(), &tt.params), tt.want)
		})
	}

	// Unset, maxUnavailable defaults to 1, and every valid cap (maxCount 0
	// for none or at least 1; any maxPercent, which judges percentages only)
	// admits 1: the unset case never draws a finding.
	t.Run("unset never draws a finding", func(t *testing.T) {
		unset := map[string]*appsv1.DaemonSet{
			"rollingUpdate unset":                  testobj.DS(testobj.WithoutRollingUpdate),
			"maxUnavailable unset":                 testobj.DS(mu(nil)),
			"maxUnavailable unset with maxSurge 0": testobj.DS(testobj.WithRollingUpdate(nil, testobj.IntOrInt(0))),
			"strategy and rollingUpdate unset":     testobj.DS(testobj.WithStrategyType(""), testobj.WithoutRollingUpdate),
			"strategy unset, maxUnavailable unset": testobj.DS(testobj.WithStrategyType(""), mu(nil)),
		}
		for name, ds := range unset {
			for _, percent := range []int{0, 1, 25, 100} {
				for _, count := range []int{0, 1, 2} {
					p := MaxUnavailableParams{MaxPercent: percent, MaxCount: count}
					if errs := p.Validate(field.NewPath("p")); len(errs) > 0 {
						t.Fatalf("%+v is not a valid config: %v", p, errs)
					}
					if fs := checkMaxUnavailable(ds, testEnv(), &p); len(fs) > 0 {
						t.Errorf("%s, %+v: got\n%s", name, p, describeFindings(fs))
					}
				}
			}
		}
	})
}

func TestMaxUnavailableParams_Validate(t *testing.T) {
	fp := field.NewPath("rules", maxUnavailableID, "parameters")
	tests := []struct {
		name   string
		params MaxUnavailableParams
		want   []fieldErr
	}{
		{name: "defaults", params: defaultMaxUnavailableParams()},
		{name: "bounds", params: MaxUnavailableParams{MaxPercent: 100, MaxCount: 0}},
		{name: "zero percent", params: MaxUnavailableParams{MaxPercent: 0, MaxCount: 5}},
		{name: "negative percent", params: MaxUnavailableParams{MaxPercent: -1},
			want: []fieldErr{{field: fp.String() + ".maxPercent", typ: field.ErrorTypeInvalid, detail: "between 0 and 100"}}},
		{name: "percent above 100", params: MaxUnavailableParams{MaxPercent: 101},
			want: []fieldErr{{field: fp.String() + ".maxPercent", typ: field.ErrorTypeInvalid}}},
		{name: "negative count", params: MaxUnavailableParams{MaxPercent: 25, MaxCount: -1},
			want: []fieldErr{{field: fp.String() + ".maxCount", typ: field.ErrorTypeInvalid, detail: "0 (no cap)"}}},
		{name: "both", params: MaxUnavailableParams{MaxPercent: 200, MaxCount: -3}, want: []fieldErr{
			{field: fp.String() + ".maxPercent", typ: field.ErrorTypeInvalid},
			{field: fp.String() + ".maxCount", typ: field.ErrorTypeInvalid},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFieldErrors(t, tt.params.Validate(fp), tt.want)
		})
	}

	t.Run("Compile reports it", func(t *testing.T) {
		cfg := Builtin().DefaultConfig()
		policy.RuleConfigOf[MaxUnavailableParams](cfg, maxUnavailableID).Parameters.MaxCount = -1
		compileErr(t, cfg, "rules.max-unavailable.parameters.maxCount")
	})
}

func TestCheckMaxUnavailable_Nodes(t *testing.T) {
	const muField = "spec.updateStrategy.rollingUpdate.maxUnavailable"
	mu := func(v string) func(*appsv1.DaemonSet) { return testobj.WithRollingUpdate(testobj.IntOrString(v), nil) }
	tests := []struct {
		name   string
		ds     *appsv1.DaemonSet
		nodes  *coverage.NodeSnapshot
		params MaxUnavailableParams
		want   []wantFinding
	}{
		{name: "half of 400 nodes", ds: testobj.DS(mu("50%")), nodes: snapshotOf(testobj.PoolNodes("w", 400)), params: defaultMaxUnavailableParams(),
			want: []wantFinding{{field: muField,
				prefix: "maxUnavailable 50% is above the 25% cap: 50% of 400 nodes = 200 nodes without this agent at once"}}},
		{name: "rounds up: 10% of 5 is 1 node", ds: testobj.DS(mu("10%")), nodes: snapshotOf(testobj.PoolNodes("w", 5)),
			params: MaxUnavailableParams{MaxPercent: 5},
			want:   []wantFinding{{field: muField, prefix: "maxUnavailable 10% is above the 5% cap: 10% of 5 nodes = 1 node without"}}},
		{name: "rounds up: 30% of 5 is 2 nodes", ds: testobj.DS(mu("30%")), nodes: snapshotOf(testobj.PoolNodes("w", 5)),
			params: defaultMaxUnavailableParams(),
			want:   []wantFinding{{field: muField, msg: []string{"30% of 5 nodes = 2 nodes without this agent at once"}}}},
		{name: "one node", ds: testobj.DS(mu("100%")), nodes: snapshotOf(testobj.Node("w-1")), params: defaultMaxUnavailableParams(),
			want: []wantFinding{{field: muField, msg: []string{"100% of 1 node = 1 node without"}}}},
		{name: "counts the nodes it runs on, not all nodes",
			ds:     testobj.DS(mu("50%"), testobj.WithTolerations()),
			nodes:  snapshotOf(testobj.PoolNodes("w", 400), testobj.ControlPlaneNode("cp-1"), testobj.PoolNodes("gpu", 9, testobj.NodeTaints(gpuTaint))),
			params: defaultMaxUnavailableParams(),
			want:   []wantFinding{{field: muField, msg: []string{"50% of 400 nodes = 200 nodes"}}}},
		{name: "runs on no node: the percentage alone",
			ds:     testobj.DS(mu("50%"), testobj.WithNodeSelector(map[string]string{poolLabel: "fpga"})),
			nodes:  snapshotOf(testobj.PoolNodes("w", 4)),
			params: defaultMaxUnavailableParams(),
			want:   []wantFinding{{field: muField, prefix: "maxUnavailable 50% is above the 25% cap: a rollout may blind 50% of the nodes at once"}}},
		{name: "under the cap with nodes", ds: testobj.DS(mu("25%")), nodes: snapshotOf(testobj.PoolNodes("w", 400)), params: defaultMaxUnavailableParams()},
		{name: "a count is not restated", ds: testobj.DS(testobj.WithRollingUpdate(testobj.IntOrInt(3), nil)), nodes: snapshotOf(testobj.PoolNodes("w", 10)),
			params: MaxUnavailableParams{MaxPercent: 25, MaxCount: 2},
			want:   []wantFinding{{field: muField, prefix: "maxUnavailable 3 is above the cap of 2: a rollout may blind 3 nodes at once"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkMaxUnavailable(tt.ds, nodeEnv(tt.nodes), &tt.params), tt.want)
		})
	}
}
