//go:build dracel_v134

// The DRA CEL API of Kubernetes 1.34 and 1.35: GetCompiler(Features) with
// consumable capacity only, devices in resource/v1.

package main

import (
	"context"
	"errors"

	"github.com/google/cel-go/cel"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

const (
	apiShape  = "1.34"
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
	if f.ListTypeAttributes {
		return judgeFn{}, errors.New("features.listTypeAttributes: this release's DRA CEL package has no list-type attributes (Kubernetes 1.36+); set it to false")
	}
	return judgeFn{dracel.Features{EnableConsumableCapacity: f.ConsumableCapacity}}, nil
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
