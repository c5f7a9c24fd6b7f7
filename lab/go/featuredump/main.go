// Command gpufleet-featuredump prints, as JSON, the facts one Kubernetes release
// holds about its feature gates, the resource.k8s.io API versions kube-apiserver
// serves and the kubeadm configuration API versions.
//
// It is compiled inside a build module that requires k8s.io/kubernetes at that
// release (gpufleet/build/release_facts.py writes it), so every fact comes from the
// release's own code:
//
//   - feature gates: k8s.io/kubernetes/pkg/features registers its versioned
//     specs (and, from 1.35, dependencies) into
//     k8s.io/apiserver/pkg/util/feature.DefaultMutableFeatureGate, the gate that
//     kube-apiserver, kube-controller-manager, kube-scheduler and the kubelet
//     parse --feature-gates / featureGates with. Each component's main adds the
//     logging gates (k8s.io/component-base/logs/api/v1) and the metrics gates
//     (k8s.io/component-base/metrics/features: cmd/kube-controller-manager,
//     cmd/kube-scheduler, pkg/kubelet/server, k8s.io/apiserver/pkg/server), and
//     kube-controller-manager the controller-manager gates
//     (k8s.io/controller-manager/pkg/features). Every gate is dumped; those only
//     one component registers are listed under componentGates.
//   - API versions: which resource.k8s.io versions kube-apiserver enables by
//     default or can enable with --runtime-config is read from the release's
//     pkg/controlplane/instance.go (the GroupVersion lists that
//     DefaultAPIResourceConfigSource enables and disables, and its per-resource
//     EnableResources/DisableResources calls), parsed with go/parser. The kinds
//     and their prerelease lifecycle come from the compiled API types
//     (k8s.io/kubernetes/pkg/api/legacyscheme).
//   - every group/version kube-apiserver's scheme registers (the install packages
//     of pkg/controlplane/import_known_versions.go, linked through a generated
//     known_versions.go), the names --runtime-config accepts;
//   - kubeadm: the versions kubeadm's scheme registers
//     (cmd/kubeadm/app/apis/kubeadm/scheme), and the old, deprecated and
//     experimental versions of validateSupportedVersion in
//     cmd/kubeadm/app/util/config/common.go, parsed with go/parser.
//
// The two source files are embedded at build time from the release's module
// (src/instance.go.txt and src/common.go.txt); the program does not link
// pkg/controlplane, whose module graph the proxy may not serve for a
// pre-release.
package main

import (
	"embed"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	metricsfeatures "k8s.io/component-base/metrics/features"
	"k8s.io/component-base/version"
	cmfeatures "k8s.io/controller-manager/pkg/features"
	kubeadmscheme "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	_ "k8s.io/kubernetes/pkg/features"
)

const (
	resourceGroup   = "resource.k8s.io"
	resourceAPIPath = "k8s.io/api/resource/"
	formatVersion   = 2
)

//go:embed src/instance.go.txt src/common.go.txt
var sources embed.FS

type specOut struct {
	Version                 string  `json:"version"`
	Default                 bool    `json:"default"`
	LockToDefault           bool    `json:"lockToDefault"`
	PreRelease              string  `json:"preRelease"`
	MinCompatibilityVersion *string `json:"minCompatibilityVersion"`
}

type gateOut struct {
	Specs        []specOut `json:"specs"`
	Dependencies []string  `json:"dependencies"`
}

type lifecycleOut struct {
	Introduced string `json:"introduced,omitempty"`
	Deprecated string `json:"deprecated,omitempty"`
	Removed    string `json:"removed,omitempty"`
}

type groupVersionOut struct {
	Version          string                  `json:"version"`
	Served           bool                    `json:"served"`
	EnabledByDefault bool                    `json:"enabledByDefault"`
	Registered       bool                    `json:"registered"`
	Kinds            []string                `json:"kinds"`
	Lifecycle        map[string]lifecycleOut `json:"lifecycle"`
	ResourceDefaults map[string]bool         `json:"resourceDefaults"`
}

type kubeadmOut struct {
	Registered   []string          `json:"registered"`
	Old          map[string]string `json:"old"`
	Deprecated   []string          `json:"deprecated"`
	Experimental []string          `json:"experimental"`
}

type dumpOut struct {
	Format                  int                           `json:"format"`
	ComponentGates          map[string]map[string]gateOut `json:"componentGates"`
	KubernetesModuleVersion string                        `json:"kubernetesModuleVersion"`
	BinaryVersion           string                        `json:"binaryVersion"`
	DependenciesDeclared    bool                          `json:"dependenciesDeclared"`
	Gates                   map[string]gateOut            `json:"gates"`
	APIGroups               map[string][]groupVersionOut  `json:"apiGroups"`
	GroupVersions           []string                      `json:"groupVersions"`
	Kubeadm                 kubeadmOut                    `json:"kubeadm"`
}

type dependencyLister interface {
	Dependencies() map[featuregate.Feature][]featuregate.Feature
}

func moduleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, dep := range info.Deps {
		if dep.Path == "k8s.io/kubernetes" {
			if dep.Replace != nil {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	return ""
}

// minCompatibilityVersion reads FeatureSpec.MinCompatibilityVersion through
// reflection: the field exists only in newer component-base releases.
func minCompatibilityVersion(spec featuregate.FeatureSpec) *string {
	field := reflect.ValueOf(spec).FieldByName("MinCompatibilityVersion")
	if !field.IsValid() || field.IsNil() {
		return nil
	}
	s := fmt.Sprint(field.Interface())
	return &s
}

func gateSpecs(specs featuregate.VersionedSpecs) []specOut {
	out := []specOut{}
	for _, spec := range specs {
		v := ""
		if spec.Version != nil {
			v = spec.Version.String()
		}
		out = append(out, specOut{
			Version:                 v,
			Default:                 spec.Default,
			LockToDefault:           spec.LockToDefault,
			PreRelease:              string(spec.PreRelease),
			MinCompatibilityVersion: minCompatibilityVersion(spec),
		})
	}
	return out
}

// registeredBy returns the gates one registration function adds to an empty gate.
func registeredBy(register func(featureGateT) error) map[string]gateOut {
	var gate featureGateT = featuregate.NewFeatureGate()
	if err := register(gate); err != nil {
		fail(err)
	}
	out := map[string]gateOut{}
	for name, specs := range gate.GetAllVersioned() {
		if n := string(name); n != "AllAlpha" && n != "AllBeta" {
			out[n] = gateOut{Specs: gateSpecs(specs), Dependencies: []string{}}
		}
	}
	return out
}

type featureGateT = featuregate.MutableVersionedFeatureGate

func dumpGates() (map[string]gateOut, map[string]map[string]gateOut, bool) {
	gate := utilfeature.DefaultMutableFeatureGate
	var deps map[featuregate.Feature][]featuregate.Feature
	lister, declared := any(gate).(dependencyLister)
	if declared {
		deps = lister.Dependencies()
	}
	out := map[string]gateOut{}
	for name, specs := range gate.GetAllVersioned() {
		n := string(name)
		// AllAlpha and AllBeta are switches over the others, not gates of their own.
		if n == "AllAlpha" || n == "AllBeta" {
			continue
		}
		g := gateOut{Specs: gateSpecs(specs), Dependencies: []string{}}
		for _, dep := range deps[name] {
			g.Dependencies = append(g.Dependencies, string(dep))
		}
		sort.Strings(g.Dependencies)
		out[n] = g
	}
	// Registered by every component's main.
	for _, register := range []func(featureGateT) error{
		func(g featureGateT) error { return logsapi.AddFeatureGates(g) },
		func(g featureGateT) error { return metricsfeatures.AddFeatureGates(g) },
	} {
		for n, g := range registeredBy(register) {
			if _, known := out[n]; !known {
				out[n] = g
			}
		}
	}
	components := map[string]map[string]gateOut{"kube-controller-manager": {}}
	for n, g := range registeredBy(func(g featureGateT) error {
		return cmfeatures.SetupCurrentKubernetesSpecificFeatureGates(g)
	}) {
		if _, known := out[n]; !known {
			components["kube-controller-manager"][n] = g
		}
	}
	return out, components, declared
}

func parseSource(name string) (*ast.File, error) {
	text, err := sources.ReadFile("src/" + name)
	if err != nil {
		return nil, err
	}
	return parser.ParseFile(token.NewFileSet(), name, text, parser.SkipObjectResolution)
}

// resourceImports maps an import name of instance.go to its resource.k8s.io
// version ("resourcev1beta2" -> "v1beta2").
func resourceImports(file *ast.File) map[string]string {
	out := map[string]string{}
	for _, imp := range file.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !strings.HasPrefix(path, resourceAPIPath) {
			continue
		}
		version := strings.TrimPrefix(path, resourceAPIPath)
		name := version
		if imp.Name != nil {
			name = imp.Name.Name
		}
		out[name] = version
	}
	return out
}

// groupVersionRef resolves `alias.SchemeGroupVersion` (optionally followed by
// `.WithResource("name")`) to a resource.k8s.io version and resource name.
func groupVersionRef(expr ast.Expr, imports map[string]string) (version, resource string, ok bool) {
	if call, isCall := expr.(*ast.CallExpr); isCall {
		sel, isSel := call.Fun.(*ast.SelectorExpr)
		if !isSel || sel.Sel.Name != "WithResource" || len(call.Args) != 1 {
			return "", "", false
		}
		lit, isLit := call.Args[0].(*ast.BasicLit)
		if !isLit {
			return "", "", false
		}
		resource, _ = strconv.Unquote(lit.Value)
		expr = sel.X
	}
	sel, isSel := expr.(*ast.SelectorExpr)
	if !isSel || sel.Sel.Name != "SchemeGroupVersion" {
		return "", "", false
	}
	id, isIdent := sel.X.(*ast.Ident)
	if !isIdent {
		return "", "", false
	}
	version, ok = imports[id.Name]
	return version, resource, ok
}

// apiConfig reads which resource.k8s.io versions (and resources) the release's
// DefaultAPIResourceConfigSource enables or disables by default.
func apiConfig() (versions map[string]bool, resources map[string]map[string]bool, err error) {
	file, err := parseSource("instance.go.txt")
	if err != nil {
		return nil, nil, err
	}
	imports := resourceImports(file)
	lists := map[string][]ast.Expr{}
	for _, decl := range file.Decls {
		gen, isGen := decl.(*ast.GenDecl)
		if !isGen || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, isLit := vs.Values[i].(*ast.CompositeLit); isLit {
						lists[name.Name] = lit.Elts
					}
				}
			}
		}
	}
	var body *ast.BlockStmt
	for _, decl := range file.Decls {
		if fn, isFn := decl.(*ast.FuncDecl); isFn && fn.Name.Name == "DefaultAPIResourceConfigSource" {
			body = fn.Body
		}
	}
	if body == nil {
		return nil, nil, fmt.Errorf("instance.go: no func DefaultAPIResourceConfigSource")
	}
	versions = map[string]bool{}
	resources = map[string]map[string]bool{}
	// The calls run in order; a later call overrides an earlier one, as in ResourceConfig.
	ast.Inspect(body, func(n ast.Node) bool {
		call, isCall := n.(*ast.CallExpr)
		if !isCall {
			return true
		}
		sel, isSel := call.Fun.(*ast.SelectorExpr)
		if !isSel {
			return true
		}
		method := sel.Sel.Name
		enable := strings.HasPrefix(method, "Enable")
		if !enable && !strings.HasPrefix(method, "Disable") {
			return true
		}
		var args []ast.Expr
		for _, arg := range call.Args {
			if id, isIdent := arg.(*ast.Ident); isIdent && call.Ellipsis.IsValid() {
				args = append(args, lists[id.Name]...)
				continue
			}
			args = append(args, arg)
		}
		for _, arg := range args {
			version, resource, ok := groupVersionRef(arg, imports)
			if !ok {
				continue
			}
			if resource == "" {
				versions[version] = enable
				continue
			}
			if resources[version] == nil {
				resources[version] = map[string]bool{}
			}
			resources[version][resource] = enable
		}
		return true
	})
	if len(versions) == 0 && len(resources) == 0 && len(imports) > 0 {
		return nil, nil, fmt.Errorf("instance.go: DefaultAPIResourceConfigSource names no %s version although the file imports %d", resourceGroup, len(imports))
	}
	return versions, resources, nil
}

type lifecycler interface {
	APILifecycleIntroduced() (int, int)
}
type deprecator interface {
	APILifecycleDeprecated() (int, int)
}
type remover interface {
	APILifecycleRemoved() (int, int)
}

func majorMinor(major, minor int) string {
	if major == 0 && minor == 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", major, minor)
}

func dumpGroup() ([]groupVersionOut, error) {
	enabled, resources, err := apiConfig()
	if err != nil {
		return nil, err
	}
	byVersion := map[string]*groupVersionOut{}
	get := func(v string) *groupVersionOut {
		if gv, ok := byVersion[v]; ok {
			return gv
		}
		gv := &groupVersionOut{Version: v, Kinds: []string{}, Lifecycle: map[string]lifecycleOut{}, ResourceDefaults: map[string]bool{}}
		byVersion[v] = gv
		return gv
	}
	for v, on := range enabled {
		out := get(v)
		out.Served = true
		out.EnabledByDefault = on
	}
	for v, byResource := range resources {
		out := get(v)
		for r, on := range byResource {
			out.ResourceDefaults[r] = on
		}
	}
	for _, gv := range legacyscheme.Scheme.PrioritizedVersionsForGroup(resourceGroup) {
		out := get(gv.Version)
		out.Registered = true
		known := legacyscheme.Scheme.KnownTypes(gv)
		for kind := range known {
			if strings.HasSuffix(kind, "List") {
				continue
			}
			if _, hasList := known[kind+"List"]; !hasList {
				continue
			}
			out.Kinds = append(out.Kinds, kind)
			obj, err := legacyscheme.Scheme.New(schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind})
			if err != nil {
				continue
			}
			lc := lifecycleOut{}
			if o, ok := obj.(lifecycler); ok {
				lc.Introduced = majorMinor(o.APILifecycleIntroduced())
			}
			if o, ok := obj.(deprecator); ok {
				lc.Deprecated = majorMinor(o.APILifecycleDeprecated())
			}
			if o, ok := obj.(remover); ok {
				lc.Removed = majorMinor(o.APILifecycleRemoved())
			}
			if lc != (lifecycleOut{}) {
				out.Lifecycle[kind] = lc
			}
		}
		sort.Strings(out.Kinds)
	}
	versions := make([]string, 0, len(byVersion))
	for v := range byVersion {
		versions = append(versions, v)
	}
	sort.Strings(versions)
	result := make([]groupVersionOut, 0, len(versions))
	for _, v := range versions {
		result = append(result, *byVersion[v])
	}
	return result, nil
}

func stringKeys(lit *ast.CompositeLit) map[string]string {
	out := map[string]string{}
	for _, elt := range lit.Elts {
		kv, isKV := elt.(*ast.KeyValueExpr)
		if !isKV {
			continue
		}
		key, isLit := kv.Key.(*ast.BasicLit)
		if !isLit {
			continue
		}
		k, _ := strconv.Unquote(key.Value)
		v := ""
		if val, isVal := kv.Value.(*ast.BasicLit); isVal {
			v, _ = strconv.Unquote(val.Value)
		}
		out[k] = v
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func dumpKubeadm() (kubeadmOut, error) {
	out := kubeadmOut{Registered: []string{}, Old: map[string]string{}, Deprecated: []string{}, Experimental: []string{}}
	for _, gv := range kubeadmscheme.Scheme.PrioritizedVersionsForGroup("kubeadm.k8s.io") {
		out.Registered = append(out.Registered, gv.String())
	}
	sort.Strings(out.Registered)
	file, err := parseSource("common.go.txt")
	if err != nil {
		return out, err
	}
	found := false
	for _, decl := range file.Decls {
		fn, isFn := decl.(*ast.FuncDecl)
		if !isFn || fn.Name.Name != "validateSupportedVersion" {
			continue
		}
		found = true
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			assign, isAssign := n.(*ast.AssignStmt)
			if !isAssign || len(assign.Lhs) != 1 || len(assign.Rhs) != 1 {
				return true
			}
			id, isIdent := assign.Lhs[0].(*ast.Ident)
			lit, isLit := assign.Rhs[0].(*ast.CompositeLit)
			if !isIdent || !isLit {
				return true
			}
			switch id.Name {
			case "oldKnownAPIVersions":
				out.Old = stringKeys(lit)
			case "deprecatedAPIVersions":
				out.Deprecated = sortedKeys(stringKeys(lit))
			case "experimentalAPIVersions":
				out.Experimental = sortedKeys(stringKeys(lit))
			}
			return true
		})
	}
	if !found {
		return out, fmt.Errorf("common.go: no func validateSupportedVersion")
	}
	return out, nil
}

// groupVersions lists every group/version kube-apiserver's scheme registers (the install
// packages of pkg/controlplane/import_known_versions.go, linked by known_versions.go):
// --runtime-config naming any other is refused at start-up ("group version ... that has
// not been registered").
func groupVersions() []string {
	out := []string{}
	for _, gv := range legacyscheme.Scheme.PrioritizedVersionsAllGroups() {
		out = append(out, gv.String())
	}
	sort.Strings(out)
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gpufleet-featuredump:", err)
	os.Exit(1)
}

func main() {
	gates, componentGates, declared := dumpGates()
	group, err := dumpGroup()
	if err != nil {
		fail(err)
	}
	kubeadm, err := dumpKubeadm()
	if err != nil {
		fail(err)
	}
	out := dumpOut{
		Format:                  formatVersion,
		KubernetesModuleVersion: moduleVersion(),
		BinaryVersion:           version.DefaultKubeBinaryVersion,
		DependenciesDeclared:    declared,
		Gates:                   gates,
		ComponentGates:          componentGates,
		APIGroups:               map[string][]groupVersionOut{resourceGroup: group},
		GroupVersions:           groupVersions(),
		Kubeadm:                 kubeadm,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fail(err)
	}
}
