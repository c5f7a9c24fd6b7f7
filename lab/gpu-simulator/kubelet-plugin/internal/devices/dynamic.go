package devices

// Dynamic MIG: the partitionable devices (KEP 4815) that the NVIDIA DRA driver
// publishes behind its DynamicMIG feature gate, derived from its source at
// kubernetes-sigs/dra-driver-nvidia-gpu commit 95932046683719c43b6a0dd9613c2e5aad5d6703:
//
//   - cmd/gpu-kubelet-plugin/nvlib.go (inspectMigProfilesAndPlacements,
//     isDynamicMIGCapable, supportsMIGModeToggle and the enumeration that uses
//     them): every GI profile whose full-size compute instance is the MIG device
//     (C == G), at every placement NVML lists for it (nvidia-smi mig -lgipp), is a
//     device; the full GPU's capacity in this mode is, per dimension, the largest
//     of all profiles, and its memory slice count the largest placement size; the
//     full GPU is a device too, except on a GPU that cannot toggle MIG mode
//     without a reset (before Hopper) whose MIG mode is enabled; a GPU that is not
//     MIG capable is published as a full GPU without counters, and a node without
//     any MIG-capable GPU falls back to the static publishing;
//   - cmd/gpu-kubelet-plugin/partitions.go (PartSharedCounterSets,
//     PartConsumesCounters, PartGetDevice, MigSpec.PartConsumesCounters,
//     capacitiesToCounters, addCountersForMemSlices, memsliceCounterName): one
//     CounterSet per GPU named <gpu device name>-counter-set, with one counter per
//     capacity dimension (the capacity name turned into a DNS label:
//     multiprocessors, copy-engines, decoders, encoders, jpeg-engines, ofa-engines,
//     memory) and one counter of value 1 per memory slice (memory-slice-<i>); the
//     full GPU consumes all of them, a MIG device its profile's capacities and the
//     memory slices of its placement;
//   - cmd/gpu-kubelet-plugin/mig.go (CommonCapacitiesMig, CommonAttributesMig,
//     MigSpecTuple.ToCanonicalName, camelToDNSName): MIG device name
//     gpu-<minor>-mig-<profile without dots>-<GI profile ID>-<placement start>,
//     attributes without uuid (the MIG device does not exist yet), capacities
//     without memory slices;
//   - cmd/gpu-kubelet-plugin/driver.go (generateSplitResourceSlices, used from
//     Kubernetes 1.35): one slice holding every GPU's CounterSet first, then per GPU
//     (in PCI bus ID order) one slice of its devices sorted by name.
//
// The profile tables come from migprofiles.json, generated from the collection's
// MIG tables (python -m gpufleet.lab.gpusim.plugin_profiles), the ones the
// simulated nvidia-smi and the planner use.

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

//go:embed migprofiles.json
var migProfilesJSON []byte

// MIGProfile is one GPU-instance profile of a GPU model (a row of
// nvidia-smi mig -lgip with the placements of -lgipp).
type MIGProfile struct {
	Name            string `json:"name"` // "1g.18gb"
	ID              int    `json:"id"`   // GI profile ID, 19
	Slices          int    `json:"slices"`
	MemoryMiB       int64  `json:"memory_mib"`
	Multiprocessors int64  `json:"multiprocessors"`
	CopyEngines     int64  `json:"copy_engines"`
	Decoders        int64  `json:"decoders"`
	Encoders        int64  `json:"encoders"`
	JPEGEngines     int64  `json:"jpeg_engines"`
	OFAEngines      int64  `json:"ofa_engines"`
	Placements      []int  `json:"placements"` // placement starts
}

// MIGModel is the MIG profile table of a GPU model.
type MIGModel struct {
	Names        []string     `json:"names"` // NVML names
	Architecture string       `json:"architecture"`
	TotalSlices  int          `json:"total_slices"`
	Profiles     []MIGProfile `json:"profiles"`
}

var loadModels = sync.OnceValues(func() ([]MIGModel, error) {
	var doc struct {
		Models []MIGModel `json:"models"`
	}
	if err := json.Unmarshal(migProfilesJSON, &doc); err != nil {
		return nil, fmt.Errorf("embedded migprofiles.json: %w", err)
	}
	return doc.Models, nil
})

func modelKey(name string) string { return strings.ToLower(strings.Join(strings.Fields(name), " ")) }

// MIGModelFor returns the MIG profile table of the GPU named name (NVML name;
// case and repeated spaces ignored, the "NVIDIA " prefix optional), as the
// collection's mig.profiles.model matches names; ok is false when there is none.
func MIGModelFor(name string) (m MIGModel, ok bool) {
	models, err := loadModels()
	if err != nil {
		return MIGModel{}, false
	}
	key := modelKey(name)
	for _, cand := range []string{key, "nvidia " + key} {
		for _, m := range models {
			for _, n := range m.Names {
				if modelKey(n) == cand {
					return m, true
				}
			}
		}
	}
	return MIGModel{}, false
}

// CounterSetName is the name of the CounterSet of the GPU with this minor.
func CounterSetName(minor int) string { return GPUDeviceName(minor) + "-counter-set" }

// MemorySliceCounter is the counter of memory slice i (zero-based).
func MemorySliceCounter(i int) string { return fmt.Sprintf("memory-slice-%d", i) }

// CounterName turns a capacity name into its counter name (camelCase to DNS
// label: copyEngines -> copy-engines).
func CounterName(capacity string) string {
	s := camelHump.ReplaceAllString(capacity, "$1-$2")
	return strings.ToLower(s)
}

var camelHump = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// profileCapacity is the capacity of a MIG device of profile p.
func profileCapacity(p MIGProfile) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
	return map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		"multiprocessors": count(p.Multiprocessors),
		"copyEngines":     count(p.CopyEngines),
		"decoders":        count(p.Decoders),
		"encoders":        count(p.Encoders),
		"jpegEngines":     count(p.JPEGEngines),
		"ofaEngines":      count(p.OFAEngines),
		"memory":          mib(p.MemoryMiB),
	}
}

// countersOf turns a capacity map into counters and adds memory slices
// [start, start+size).
func countersOf(capacity map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, start, size int) map[string]resourceapi.Counter {
	out := make(map[string]resourceapi.Counter, len(capacity)+size)
	for name, c := range capacity {
		out[CounterName(string(name))] = resourceapi.Counter{Value: c.Value.DeepCopy()}
	}
	for i := start; i < start+size; i++ {
		out[MemorySliceCounter(i)] = resourceapi.Counter{Value: *resource.NewQuantity(1, resource.BinarySI)}
	}
	return out
}

// maxCapacity is the full GPU's capacity in dynamic MIG mode: per dimension
// the largest of all profiles that have a placement; slices is the largest
// placement size (the GPU's memory slice count as NVIDIA's driver infers it).
func maxCapacity(m MIGModel) (capacity map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, slices int) {
	capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
	for _, p := range m.Profiles {
		if len(p.Placements) == 0 {
			continue
		}
		slices = max(slices, p.Slices)
		for name, c := range profileCapacity(p) {
			if cur, ok := capacity[name]; !ok || c.Value.Cmp(cur.Value) > 0 {
				capacity[name] = c
			}
		}
	}
	return capacity, slices
}

// MIGModeToggles reports whether the GPU can enable and disable MIG mode
// without a reset (Hopper and later); NVIDIA's driver then publishes the full
// GPU whatever the current MIG mode.
func MIGModeToggles(architecture string) bool {
	switch strings.ToLower(architecture) {
	case "ampere", "turing", "volta", "pascal", "maxwell", "kepler":
		return false
	}
	return true
}

// BuildDynamic computes the devices of a node in dynamic MIG mode. The result
// has CounterSets and, per GPU in PCI bus ID order, DeviceGroups (its devices
// sorted by name); Devices holds them all in that order. A node without a GPU
// that is MIG capable and has a profile table gets the static devices of Build
// (no counters), as NVIDIA's driver falls back to its full-GPU publishing there.
func BuildDynamic(s *state.State) (*Result, error) {
	dynamic := map[int]MIGModel{}
	for _, g := range s.GPUs {
		if !g.MIGCapable {
			continue
		}
		if m, ok := MIGModelFor(g.Name); ok {
			dynamic[g.Index] = m
		}
	}
	if len(dynamic) == 0 {
		res, err := Build(s)
		if err != nil {
			return nil, err
		}
		res.Warnings = append(res.Warnings,
			"dynamic MIG: no MIG-capable GPU with a known profile table on this node; publishing full GPUs and MIG devices as without dynamic MIG")
		return res, nil
	}
	driverVersion, err := SemverFromNVIDIA(s.DriverVersion)
	if err != nil {
		return nil, fmt.Errorf("driver_version: %w", err)
	}
	cudaDriverVersion, err := SemverFromNVIDIA(s.CUDAVersion)
	if err != nil {
		return nil, fmt.Errorf("cuda_version: %w", err)
	}

	type gpuGroup struct {
		bdf        string
		counterSet *resourceapi.CounterSet
		devices    []resourceapi.Device
	}
	var groups []gpuGroup
	res := &Result{Infos: map[string]Info{}}
	for _, g := range s.GPUs {
		bdf, common, err := gpuCommon(g, driverVersion, cudaDriverVersion)
		if err != nil {
			return nil, err
		}
		gpuName := GPUDeviceName(g.Minor)
		gpuInfo := Info{
			Name: gpuName, Type: TypeGPU, UUID: g.UUID, GPUMinor: g.Minor, GPUIndex: g.Index,
			ProductName: g.Name, PCIBusID: bdf, MemoryMiB: g.MemoryMiB,
		}
		var devs []resourceapi.Device
		var counterSet *resourceapi.CounterSet
		infos := map[string]Info{}
		m, isDynamic := dynamic[g.Index]
		if !isDynamic {
			if g.MIGCapable {
				res.Warnings = append(res.Warnings, fmt.Sprintf(
					"GPU %d (%s): no MIG profile table for %q; published as a full GPU without partitions",
					g.Index, g.UUID, g.Name))
			}
			attrs := common()
			attrs["type"] = str(TypeGPU)
			attrs["uuid"] = str(g.UUID)
			devs = append(devs, resourceapi.Device{
				Name: gpuName, Attributes: attrs,
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": mib(g.MemoryMiB)},
			})
			infos[gpuName] = gpuInfo
		} else {
			setName := CounterSetName(g.Minor)
			maxCap, slices := maxCapacity(m)
			counterSet = &resourceapi.CounterSet{Name: setName, Counters: countersOf(maxCap, 0, slices)}
			if !g.MIGEnabled() || MIGModeToggles(g.Architecture) {
				attrs := common()
				attrs["type"] = str(TypeGPU)
				attrs["uuid"] = str(g.UUID)
				devs = append(devs, resourceapi.Device{
					Name: gpuName, Attributes: attrs, Capacity: maxCap,
					ConsumesCounters: []resourceapi.DeviceCounterConsumption{{
						CounterSet: setName, Counters: countersOf(maxCap, 0, slices),
					}},
				})
				if n := len(g.GPUInstances); n > 0 {
					gpuInfo.PrepareError = fmt.Sprintf("the GPU holds %d GPU instances; "+
						"the full GPU is handed out only when it holds none", n)
				}
				infos[gpuName] = gpuInfo
			}
			for _, p := range m.Profiles {
				for _, start := range p.Placements {
					name := MIGDeviceName(g.Minor, p.Name, p.ID, start)
					attrs := common()
					attrs["type"] = str(TypeMIG)
					attrs["parentUUID"] = str(g.UUID)
					attrs["profile"] = str(p.Name)
					capacity := profileCapacity(p)
					devs = append(devs, resourceapi.Device{
						Name: name, Attributes: attrs, Capacity: capacity,
						ConsumesCounters: []resourceapi.DeviceCounterConsumption{{
							CounterSet: setName, Counters: countersOf(capacity, start, p.Slices),
						}},
					})
					infos[name] = Info{
						Name: name, Type: TypeMIG, ParentUUID: g.UUID, Profile: p.Name,
						GPUMinor: g.Minor, GPUIndex: g.Index, ProductName: g.Name, PCIBusID: bdf,
						MemoryMiB:  p.MemoryMiB,
						DynamicMIG: &DynamicMIG{GIProfileID: p.ID, PlacementStart: start, PlacementSize: p.Slices},
					}
				}
			}
		}
		sort.SliceStable(devs, func(i, j int) bool { return devs[i].Name < devs[j].Name })
		for _, d := range devs {
			if err := res.add(d, infos[d.Name]); err != nil {
				return nil, err
			}
		}
		groups = append(groups, gpuGroup{bdf: bdf, counterSet: counterSet, devices: devs})
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].bdf < groups[j].bdf })
	res.Devices = res.Devices[:0]
	for _, grp := range groups {
		if grp.counterSet != nil {
			res.CounterSets = append(res.CounterSets, *grp.counterSet)
		}
		res.DeviceGroups = append(res.DeviceGroups, grp.devices)
		res.Devices = append(res.Devices, grp.devices...)
	}
	return res, nil
}
