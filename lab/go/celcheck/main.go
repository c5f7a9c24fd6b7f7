// Command gpufleet-celcheck judges DRA device selector expressions the way one
// Kubernetes release does, with that release's own CEL environment for DRA
// (k8s.io/dynamic-resource-allocation/cel).
//
// It is compiled inside a build module that requires
// k8s.io/dynamic-resource-allocation at the release's staging version
// (gpufleet/build/celcheck.py writes it), so every verdict comes from the
// release's own code:
//
//   - compile: cel.GetCompiler(features).CompileCELExpression with the
//     environment type the API server validates a new object with
//     (environment.NewExpressions), then the checks that
//     pkg/apis/resource/validation applies to a selector: the length limit
//     maxLength and the estimated cost against
//     maxCost;
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
// Output (stdout, JSON): the API shape ("api": "1.33", "1.34", "1.36" or "1.38"), the
// module versions it was built from, the limits, the
// functions and macros the environment declares (with -functions), and per
// expression the compile verdict ("ok", "invalid", "too_long", "too_expensive",
// "internal") with the message and estimated cost, and per device the result
// (true/false) or the runtime error with its kind (see errorKind).
//
// The DRA CEL API of the module differs between releases; the files api_*.go
// adapt it, one per API shape, chosen by build tag (gpufleet/build/celcheck.py
// passes the tag of the release): api_v138.go (no tag, 1.38 and newer: as
// 1.36, cel-go as cel.dev/cel-go, devices converted to the allocator's form of
// k8s.io/dynamic-resource-allocation/api), api_v136.go (dracel_v136, 1.36 and
// 1.37: Features{EnableConsumableCapacity, EnableListTypeAttributes},
// resource/v1), api_v134.go (dracel_v134, 1.34 and 1.35: Features{EnableConsumableCapacity},
// resource/v1) and api_v133.go (dracel_v133, 1.33: GetCompiler() without
// features, resource/v1beta1, no allowMultipleAllocations). A feature the
// release does not have cannot be asked for (exit 2). A device field the
// release's API types lack is dropped, as the release's decoder drops it, and
// named under "dropped".
//
// Exit codes: 0 done, 2 unusable input.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"
)

type featuresIn struct {
	ConsumableCapacity bool `json:"consumableCapacity"`
	ListTypeAttributes bool `json:"listTypeAttributes"`
}

type input struct {
	Features    featuresIn        `json:"features"`
	Expressions []string          `json:"expressions"`
	Devices     []json.RawMessage `json:"devices"`
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
	API         string                 `json:"api"`
	Modules     map[string]string      `json:"modules"`
	Dropped     []string               `json:"dropped,omitempty"`
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
		case "k8s.io/dynamic-resource-allocation", "k8s.io/apiserver", "k8s.io/api", "github.com/google/cel-go", "cel.dev/cel-go":
			if dep.Replace != nil {
				out[dep.Path] = dep.Replace.Version
			} else {
				out[dep.Path] = dep.Version
			}
		}
	}
	return out
}

// decodeDevice reads one device into the release's API types: strictly, or,
// when the device has fields those types lack, without them (what the
// release's own decoder does with unknown fields); dropped says which.
func decodeDevice(raw json.RawMessage) (d deviceIn, dropped string, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	strictErr := dec.Decode(&d)
	if strictErr == nil {
		return d, "", nil
	}
	d = deviceIn{}
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, "", err
	}
	return d, strictErr.Error(), nil
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
	judge, err := newJudge(in.Features)
	if err != nil {
		fail("%v", err)
	}
	out := output{
		API:         apiShape,
		Modules:     modules(),
		MaxLength:   maxLength,
		MaxCost:     maxCost,
		Expressions: []expressionOut{},
	}
	devices := make([]deviceIn, 0, len(in.Devices))
	for i, raw := range in.Devices {
		d, dropped, err := decodeDevice(raw)
		if err != nil {
			fail("devices[%d]: %v", i, err)
		}
		if dropped != "" {
			out.Dropped = append(out.Dropped, fmt.Sprintf("%s: %s", d.Name, dropped))
		}
		devices = append(devices, d)
	}
	for _, expr := range in.Expressions {
		eo := expressionOut{Expression: expr, Results: []resultOut{}}
		if len(expr) > maxLength {
			eo.Compile = compileOut{Verdict: "too_long", Message: fmt.Sprintf("may not be longer than %d bytes", maxLength)}
			out.Expressions = append(out.Expressions, eo)
			continue
		}
		result := judge.compile(expr)
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
			out.Macros = macroNames(result.Environment)
			sort.Strings(out.Macros)
		}
		switch {
		case result.Error != nil:
			verdict := "invalid"
			if result.Error.Type != "FieldValueInvalid" && !strings.Contains(string(result.Error.Type), "Invalid") {
				verdict = "internal"
			}
			eo.Compile = compileOut{Verdict: verdict, Message: result.Error.Detail}
		case result.MaxCost > maxCost:
			cost := result.MaxCost
			eo.Compile = compileOut{Verdict: "too_expensive", Message: "too complex, exceeds cost limit", MaxCost: &cost}
		default:
			cost := result.MaxCost
			eo.Compile = compileOut{Verdict: "ok", MaxCost: &cost}
		}
		if result.Error == nil {
			for _, d := range devices {
				matched, err := matches(context.Background(), result, d)
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
