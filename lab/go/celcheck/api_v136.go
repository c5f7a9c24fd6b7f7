//go:build dracel_v136

// The DRA CEL API of Kubernetes 1.36 and 1.37: GetCompiler(Features) with
// consumable capacity and list-type attributes, devices in resource/v1.

package main

import (
	"context"

	"github.com/google/cel-go/cel"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

const (
	apiShape  = "1.36"
	maxLength = resourceapi.CELSelectorExpressionMaxLength
	maxCost   = resourceapi.CELSelectorExpressionMaxCost
)

type compiled = dracel.CompilationResult

type deviceIn struct {
	Name                     string                                                    `json:"name"`
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
}

type judgeFn struct{ features dracel.Features }

func newJudge(f featuresIn) (judgeFn, error) {
	return judgeFn{dracel.Features{
		EnableConsumableCapacity: f.ConsumableCapacity,
		EnableListTypeAttributes: f.ListTypeAttributes,
	}}, nil
}

func (j judgeFn) compile(expr string) compiled {
	envType := environment.NewExpressions
	return dracel.GetCompiler(j.features).CompileCELExpression(expr, dracel.Options{EnvType: &envType})
}

func matches(ctx context.Context, r compiled, d deviceIn) (bool, error) {
	matched, _, err := r.DeviceMatches(ctx, dracel.Device{
		Driver:                   d.Driver,
		AllowMultipleAllocations: d.AllowMultipleAllocations,
		Attributes:               d.Attributes,
		Capacity:                 d.Capacity,
	})
	return matched, err
}

// macroNames lists the macros of env (cel-go's Env.Macros).
func macroNames(env *cel.Env) []string {
	var out []string
	for _, m := range env.Macros() {
		out = append(out, m.Function())
	}
	return out
}
