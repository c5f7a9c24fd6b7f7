// Command gpufleet-featuredump prints, as JSON, what one Kubernetes release
// registers for Dynamic Resource Allocation (DRA): the versioned specs of every
// DRA feature gate and their declared dependencies, the resource.k8s.io group
// versions kube-apiserver can serve and which of them are enabled by default,
// and the kubeadm configuration API versions kubeadm registers.
//
// It is compiled inside a per-release build module that requires
// k8s.io/kubernetes at that release, so every fact comes from the release's
// own code:
//
//   - feature gates: k8s.io/kubernetes/pkg/features registers its versioned
//     specs (and, from 1.35, dependencies) into
//     k8s.io/apiserver/pkg/util/feature.DefaultMutableFeatureGate, the gate
//     kube-apiserver, kube-controller-manager, kube-scheduler and kubelet all
//     parse --feature-gates / featureGates with;
//   - API versions: k8s.io/kubernetes/pkg/controlplane.DefaultAPIResourceConfigSource
//     (the versions kube-apiserver knows how to serve, enabled or disabled by
//     default) and k8s.io/kubernetes/pkg/api/legacyscheme (the versions that
//     --runtime-config accepts);
//   - kubeadm: k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme.
//
// Usage:
//
//	gpufleet-featuredump [-gates NAME,NAME...] [-all-gates]
//
// Gates selected: every gate whose name starts with "DRA", DynamicResourceAllocation,
// the DRA-related gates listed in extraGates, the names given with -gates, or
// every registered gate with -all-gates. A requested name the release does not
// register is listed under "unregisteredRequested".
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/version"
	kubeadmscheme "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	"k8s.io/kubernetes/pkg/controlplane"
	_ "k8s.io/kubernetes/pkg/features"
)

const resourceGroup = "resource.k8s.io"

// extraGates are DRA-related gates whose names do not start with "DRA", and
// gates DRA gates depend on.
var extraGates = []string{
	"DynamicResourceAllocation",
	"KubeletPodResourcesDynamicResources",
	"ResourceHealthStatus",
	"GenericWorkload",
	"NodeDeclaredFeatures",
}

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

type dumpOut struct {
	KubernetesModuleVersion string                       `json:"kubernetesModuleVersion"`
	BinaryVersion           string                       `json:"binaryVersion"`
	GitVersion              string                       `json:"gitVersion"`
	DependenciesDeclared    bool                         `json:"dependenciesDeclared"`
	Gates                   map[string]gateOut           `json:"gates"`
	UnregisteredRequested   []string                     `json:"unregisteredRequested"`
	APIGroups               map[string][]groupVersionOut `json:"apiGroups"`
	KubeadmAPIVersions      []string                     `json:"kubeadmAPIVersions"`
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

func wanted(name string, requested map[string]bool, all bool) bool {
	return all || strings.HasPrefix(name, "DRA") || requested[name]
}

func dumpGates(requested map[string]bool, all bool) (map[string]gateOut, bool, []string) {
	gate := utilfeature.DefaultMutableFeatureGate
	var deps map[featuregate.Feature][]featuregate.Feature
	lister, declared := any(gate).(dependencyLister)
	if declared {
		deps = lister.Dependencies()
	}
	out := map[string]gateOut{}
	for name, specs := range gate.GetAllVersioned() {
		n := string(name)
		if !wanted(n, requested, all) || strings.HasPrefix(n, "All") {
			continue
		}
		g := gateOut{Specs: []specOut{}, Dependencies: []string{}}
		for _, spec := range specs {
			v := ""
			if spec.Version != nil {
				v = spec.Version.String()
			}
			g.Specs = append(g.Specs, specOut{
				Version:                 v,
				Default:                 spec.Default,
				LockToDefault:           spec.LockToDefault,
				PreRelease:              string(spec.PreRelease),
				MinCompatibilityVersion: minCompatibilityVersion(spec),
			})
		}
		for _, dep := range deps[name] {
			g.Dependencies = append(g.Dependencies, string(dep))
		}
		sort.Strings(g.Dependencies)
		out[n] = g
	}
	missing := []string{}
	for n := range requested {
		if _, ok := out[n]; !ok {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	return out, declared, missing
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

func dumpGroup(group string) []groupVersionOut {
	config := controlplane.DefaultAPIResourceConfigSource()
	byVersion := map[string]*groupVersionOut{}
	get := func(v string) *groupVersionOut {
		if gv, ok := byVersion[v]; ok {
			return gv
		}
		gv := &groupVersionOut{
			Version:          v,
			Kinds:            []string{},
			Lifecycle:        map[string]lifecycleOut{},
			ResourceDefaults: map[string]bool{},
		}
		byVersion[v] = gv
		return gv
	}
	for gv, enabled := range config.GroupVersionConfigs {
		if gv.Group != group {
			continue
		}
		out := get(gv.Version)
		out.Served = true
		out.EnabledByDefault = enabled
	}
	for gvr, enabled := range config.ResourceConfigs {
		if gvr.Group != group {
			continue
		}
		get(gvr.Version).ResourceDefaults[gvr.Resource] = enabled
	}
	for _, gv := range legacyscheme.Scheme.PrioritizedVersionsForGroup(group) {
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
	return result
}

func main() {
	gatesFlag := flag.String("gates", "", "comma-separated gate names to dump besides the DRA gates")
	allGates := flag.Bool("all-gates", false, "dump every registered feature gate")
	flag.Parse()

	requested := map[string]bool{}
	for _, n := range extraGates {
		requested[n] = true
	}
	for _, n := range strings.Split(*gatesFlag, ",") {
		if n = strings.TrimSpace(n); n != "" {
			requested[n] = true
		}
	}

	gates, declared, missing := dumpGates(requested, *allGates)
	kubeadmVersions := []string{}
	for _, gv := range kubeadmscheme.Scheme.PrioritizedVersionsForGroup("kubeadm.k8s.io") {
		kubeadmVersions = append(kubeadmVersions, gv.Version)
	}
	sort.Strings(kubeadmVersions)

	out := dumpOut{
		KubernetesModuleVersion: moduleVersion(),
		BinaryVersion:           version.DefaultKubeBinaryVersion,
		GitVersion:              version.Get().GitVersion,
		DependenciesDeclared:    declared,
		Gates:                   gates,
		UnregisteredRequested:   missing,
		APIGroups:               map[string][]groupVersionOut{resourceGroup: dumpGroup(resourceGroup)},
		KubeadmAPIVersions:      kubeadmVersions,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "gpufleet-featuredump:", err)
		os.Exit(1)
	}
}
