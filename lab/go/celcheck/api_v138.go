//go:build !dracel_v133 && !dracel_v134 && !dracel_v136

// The DRA CEL API of Kubernetes 1.38 and newer: GetCompiler(Features) as in
// 1.36, cel-go under its cel.dev module path, and DeviceMatches taking the
// device in the allocator's own form (k8s.io/dynamic-resource-allocation/api:
// attributes and capacity keyed by unique strings). The device is converted
// from resource/v1 by that package's ResourceSlice conversion, the one
// kube-scheduler's ResourceSlice informer applies, and looked up through the
// converted slice's unique strings, as the allocator does.

package main

import (
	"context"
	"fmt"

	"cel.dev/cel-go/cel"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	draapi "k8s.io/dynamic-resource-allocation/api"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

const (
	apiShape  = "1.38"
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
	in := resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver: d.Driver,
		Devices: []resourceapi.Device{{
			Name:                     d.Name,
			AllowMultipleAllocations: d.AllowMultipleAllocations,
			Attributes:               d.Attributes,
			Capacity:                 d.Capacity,
		}},
	}}
	var slice draapi.ResourceSlice
	if err := draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice(&in, &slice, nil); err != nil {
		return false, fmt.Errorf("converting device %s: %w", d.Name, err)
	}
	device := slice.Spec.Devices[0]
	matched, _, err := r.DeviceMatches(ctx, dracel.Device{
		Driver:                   d.Driver,
		AllowMultipleAllocations: device.AllowMultipleAllocations,
		LookupUniqueString:       slice.LookupUniqueString,
		Attributes:               device.Attributes,
		Capacity:                 device.Capacity,
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
