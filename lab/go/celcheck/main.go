// Command gpufleet-celcheck judges DRA device selector expressions the way one
// Kubernetes release does, with that release's own CEL environment for DRA
// (k8s.io/dynamic-resource-allocation/cel).
//
// It is compiled inside a build module that requires
// k8s.io/dynamic-resource-allocation at the release's staging version
// (gpufleet/lab/celcheck.py writes it), so every verdict comes from the
// release's own code:
//
//   - compile: cel.GetCompiler(features).CompileCELExpression with the
//     environment type the API server validates a new object with
//     (environment.NewExpressions), then the checks that
//     pkg/apis/resource/validation applies to a selector: the length limit
//     resourceapi.CELSelectorExpressionMaxLength and the estimated cost against
//     resourceapi.CELSelectorExpressionMaxCost;
//   - evaluate: CompilationResult.DeviceMatches on each device, with the
//     release's runtime cost limit (the compiler's default), as kube-scheduler
//     does (structured/internal/*/allocator_*.go selectorsMatch).
//
// Input (stdin, JSON):
//
//	{"features": {"consumableCapacity": bool, "listTypeAttributes": bool},
//	 "expressions": ["device.driver == 'gpu.nvidia.com'", ...],
//	 "devices": [{"name": "gpu-0", "driver": "gpu.nvidia.com",
//	              "allowMultipleAllocations": false,
//	              "attributes": {"productName": {"string": "NVIDIA H200"}},
//	              "capacity": {"memory": {"value": "143771Mi"}}}]}
//
// Output (stdout, JSON): the module versions it was built from, the limits, the
// functions and macros the environment declares (with -functions), and per
// expression the compile verdict ("ok", "invalid", "too_long", "too_expensive",
// "internal") with the message and estimated cost, and per device the result
// (true/false) or the runtime error with its kind (see errorKind).
//
// Exit codes: 0 done, 2 unusable input.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type featuresIn struct {
	ConsumableCapacity bool `json:"consumableCapacity"`
	ListTypeAttributes bool `json:"listTypeAttributes"`
}

type deviceIn struct {
	Name                     string                                                    `json:"name"`
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
}

type input struct {
	Features    featuresIn `json:"features"`
	Expressions []string   `json:"expressions"`
	Devices     []deviceIn `json:"devices"`
}

type resultOut struct {
	Device  string `json:"device"`
	Result  *bool  `json:"result"`
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}

type compileOut struct {
	Verdict string  `json:"verdict"`
	Message string  `json:"message,omitempty"`
	MaxCost *uint64 `json:"maxCost,omitempty"`
}

type expressionOut struct {
	Expression string      `json:"expression"`
	Compile    compileOut  `json:"compile"`
	Results    []resultOut `json:"results"`
}

type functionOut struct {
	Global bool `json:"global"`
	Member bool `json:"member"`
}

type output struct {
	Modules     map[string]string      `json:"modules"`
	MaxLength   int                    `json:"maxLength"`
	MaxCost     uint64                 `json:"maxCost"`
	Functions   map[string]functionOut `json:"functions,omitempty"`
	Macros      []string               `json:"macros,omitempty"`
	Expressions []expressionOut        `json:"expressions"`
}

// errorKind sorts a CEL runtime error by what went wrong, from the wording of
// cel-go (common/types/err.go, interpreter) and of the DRA package.
func errorKind(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "no such key"), strings.Contains(msg, "no such attribute"):
		return "no_such_key"
	case strings.Contains(msg, "no such overload"), strings.Contains(msg, "no matching overload"):
		return "no_such_overload"
	case strings.Contains(msg, "cost limit exceeded"):
		return "cost_limit"
	case strings.Contains(msg, "division by zero"), strings.Contains(msg, "modulus by zero"):
		return "division_by_zero"
	case strings.Contains(msg, "overflow"):
		return "overflow"
	case strings.Contains(msg, "index out of range"), strings.Contains(msg, "out of range"):
		return "out_of_range"
	case strings.Contains(msg, "could not be converted to bool"):
		return "not_bool"
	default:
		return "other"
	}
}

func modules() map[string]string {
	out := map[string]string{}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	for _, dep := range info.Deps {
		switch dep.Path {
		case "k8s.io/dynamic-resource-allocation", "k8s.io/apiserver", "k8s.io/api", "github.com/google/cel-go":
			if dep.Replace != nil {
				out[dep.Path] = dep.Replace.Version
			} else {
				out[dep.Path] = dep.Version
			}
		}
	}
	return out
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gpufleet-celcheck: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	withFunctions := flag.Bool("functions", false, "also list the functions and macros of the environment")
	flag.Parse()
	var in input
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		fail("stdin is not the expected JSON document: %v", err)
	}
	compiler := dracel.GetCompiler(dracel.Features{
		EnableConsumableCapacity: in.Features.ConsumableCapacity,
		EnableListTypeAttributes: in.Features.ListTypeAttributes,
	})
	envType := environment.NewExpressions
	out := output{
		Modules:     modules(),
		MaxLength:   resourceapi.CELSelectorExpressionMaxLength,
		MaxCost:     resourceapi.CELSelectorExpressionMaxCost,
		Expressions: []expressionOut{},
	}
	for _, expr := range in.Expressions {
		eo := expressionOut{Expression: expr, Results: []resultOut{}}
		if len(expr) > resourceapi.CELSelectorExpressionMaxLength {
			eo.Compile = compileOut{Verdict: "too_long", Message: fmt.Sprintf("may not be longer than %d bytes", resourceapi.CELSelectorExpressionMaxLength)}
			out.Expressions = append(out.Expressions, eo)
			continue
		}
		result := compiler.CompileCELExpression(expr, dracel.Options{EnvType: &envType})
		if *withFunctions && out.Functions == nil && result.Environment != nil {
			out.Functions = map[string]functionOut{}
			for name, decl := range result.Environment.Functions() {
				f := functionOut{}
				for _, o := range decl.OverloadDecls() {
					if o.IsMemberFunction() {
						f.Member = true
					} else {
						f.Global = true
					}
				}
				out.Functions[name] = f
			}
			for _, m := range result.Environment.Macros() {
				out.Macros = append(out.Macros, m.Function())
			}
			sort.Strings(out.Macros)
		}
		switch {
		case result.Error != nil:
			verdict := "invalid"
			if result.Error.Type != "FieldValueInvalid" && !strings.Contains(string(result.Error.Type), "Invalid") {
				verdict = "internal"
			}
			eo.Compile = compileOut{Verdict: verdict, Message: result.Error.Detail}
		case result.MaxCost > resourceapi.CELSelectorExpressionMaxCost:
			cost := result.MaxCost
			eo.Compile = compileOut{Verdict: "too_expensive", Message: "too complex, exceeds cost limit", MaxCost: &cost}
		default:
			cost := result.MaxCost
			eo.Compile = compileOut{Verdict: "ok", MaxCost: &cost}
		}
		if result.Error == nil {
			for _, d := range in.Devices {
				matched, _, err := result.DeviceMatches(context.Background(), dracel.Device{
					Driver:                   d.Driver,
					AllowMultipleAllocations: d.AllowMultipleAllocations,
					Attributes:               d.Attributes,
					Capacity:                 d.Capacity,
				})
				ro := resultOut{Device: d.Name}
				if err != nil {
					ro.Error = errorKind(err)
					ro.Message = err.Error()
				} else {
					ro.Result = &matched
				}
				eo.Results = append(eo.Results, ro)
			}
		}
		out.Expressions = append(out.Expressions, eo)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fail("writing the result: %v", err)
	}
}
