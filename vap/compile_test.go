package vap

import (
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// expression is a CEL expression with the type the API server requires of it.
type expression struct {
	text    string
	returns *cel.Type
}

func (e expression) GetExpression() string    { return e.text }
func (e expression) ReturnTypes() []*cel.Type { return []*cel.Type{e.returns} }

// namedExpression is a policy variable.
type namedExpression struct {
	name string
	expression
}

func (e namedExpression) GetName() string { return e.name }

// minimumVersion is the oldest Kubernetes minor whose CEL environment must
// accept every generated expression (two-variable comprehensions arrived in 1.32).
var minimumVersion = version.MajorMinor(1, 32)

// compileAll compiles every expression of the rendered policies as the API
// server does when a policy is created, and fails the test on any error.
func compileAll(t *testing.T, res *Result) int {
	t.Helper()
	opts := plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}
	n := 0
	for _, p := range res.Policies {
		compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(minimumVersion))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range p.Spec.Variables {
			r := compiler.CompileAndStoreVariable(namedExpression{v.Name, expression{v.Expression, cel.AnyType}}, opts, environment.NewExpressions)
			if r.Error != nil {
				t.Errorf("%s: variable %s: %v\n%s", p.Name, v.Name, r.Error, v.Expression)
			}
			n++
		}
		var exprs []expression
		for _, c := range p.Spec.MatchConditions {
			exprs = append(exprs, expression{c.Expression, cel.BoolType})
		}
		for _, v := range p.Spec.Validations {
			exprs = append(exprs, expression{v.Expression, cel.BoolType}, expression{v.MessageExpression, cel.StringType})
		}
		for _, e := range exprs {
			r := compiler.CompileCELExpression(e, opts, environment.NewExpressions)
			if r.Error != nil {
				t.Errorf("%s: %v\n%s", p.Name, r.Error, e.text)
			}
			n++
		}
	}
	return n
}

func TestRender_CompilesWithTheAPIServersCEL(t *testing.T) {
	for name, cfg := range testPolicies(t) {
		t.Run(name, func(t *testing.T) {
			res, err := Render(cfg, Options{Namespace: "dsguard-system", Today: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)})
			if err != nil {
				t.Fatal(err)
			}
			n := compileAll(t, res)
			t.Logf("%d policies, %d expressions", len(res.Policies), n)
		})
	}
}
