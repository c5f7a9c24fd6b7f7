//go:build dracel_v133

// The DRA CEL API of Kubernetes 1.33: GetCompiler() without features, devices
// in resource/v1beta1 without allowMultipleAllocations.

package main

import (
	"context"
	"errors"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	resourceapi "k8s.io/api/resource/v1beta1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

const (
	apiShape  = "1.33"
	maxLength = resourceapi.CELSelectorExpressionMaxLength
	maxCost   = resourceapi.CELSelectorExpressionMaxCost
)

type compiled = dracel.CompilationResult

type deviceIn struct {
	Name       string                                                    `json:"name"`
	Driver     string                                                    `json:"driver"`
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
}

type judgeFn struct{}

func newJudge(f featuresIn) (judgeFn, error) {
	switch {
	case f.ConsumableCapacity:
		return judgeFn{}, errors.New("features.consumableCapacity: this release's DRA CEL package has no consumable capacity (Kubernetes 1.34+); set it to false")
	case f.ListTypeAttributes:
		return judgeFn{}, errors.New("features.listTypeAttributes: this release's DRA CEL package has no list-type attributes (Kubernetes 1.36+); set it to false")
	}
	return judgeFn{}, nil
}

func (judgeFn) compile(expr string) compiled {
	envType := environment.NewExpressions
	return dracel.GetCompiler().CompileCELExpression(expr, dracel.Options{EnvType: &envType})
}

func matches(ctx context.Context, r compiled, d deviceIn) (bool, error) {
	matched, _, err := r.DeviceMatches(ctx, dracel.Device{
		Driver:     d.Driver,
		Attributes: d.Attributes,
		Capacity:   d.Capacity,
	})
	return matched, err
}

// macroProbes holds, per macro name cel-go has, an expression that calls it. The
// cel-go of this release (v0.23) cannot list an environment's macros, so
// macroNames parses each probe: a macro is expanded when parsed (into a
// comprehension, a test-only select or the like), any other name stays a call.
var macroProbes = map[string]string{
	"has":               "has(a.b)",
	"all":               "[1].all(x, true)",
	"exists":            "[1].exists(x, true)",
	"exists_one":        "[1].exists_one(x, true)",
	"existsOne":         "[1].existsOne(x, true)",
	"map":               "[1].map(x, x)",
	"filter":            "[1].filter(x, true)",
	"bind":              "cel.bind(x, 1, x)",
	"optMap":            "a.optMap(x, x)",
	"optFlatMap":        "a.optFlatMap(x, x)",
	"sortBy":            "[1].sortBy(x, x)",
	"transformList":     "[1].transformList(i, v, v)",
	"transformMap":      "{1: 1}.transformMap(k, v, v)",
	"transformMapEntry": "{1: 1}.transformMapEntry(k, v, {k: v})",
}

// macroNames lists the macros of env among those macroProbes knows.
func macroNames(env *cel.Env) []string {
	var out []string
	for name, probe := range macroProbes {
		ast, issues := env.Parse(probe)
		if issues != nil && issues.Err() != nil {
			continue
		}
		root := ast.NativeRep().Expr()
		if root.Kind() != celast.CallKind || root.AsCall().FunctionName() != name {
			out = append(out, name)
		}
	}
	return out
}
