package devices

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// A GPU-instance profile as nvidia-smi mig -lgip / -lgipp print it.
type lgipRow struct {
	name                   string
	id, slices             int
	memMiB                 int64
	sm, ce, dec, enc, jpeg int64
	ofa                    int64
	placements             []int
}

// H200 141GB: the real capture tests/unit/data/gpu/h200-single/smi-mig-lgip.txt
// and smi-mig-lgipp.txt (driver 580.159.04; memory in MiB from nvml.txt
// memorySizeMB: 16384, 33280, 71424, 143360).
var h200Rows = []lgipRow{
	{"1g.18gb", 19, 1, 16384, 16, 1, 1, 0, 1, 0, []int{0, 1, 2, 3, 4, 5, 6}},
	{"1g.18gb+me", 20, 1, 16384, 16, 1, 1, 0, 1, 1, []int{0, 1, 2, 3, 4, 5, 6}},
	{"1g.35gb", 15, 2, 33280, 26, 1, 1, 0, 1, 0, []int{0, 2, 4, 6}},
	{"2g.35gb", 14, 2, 33280, 32, 2, 2, 0, 2, 0, []int{0, 2, 4}},
	{"3g.71gb", 9, 4, 71424, 60, 3, 3, 0, 3, 0, []int{0, 4}},
	{"4g.71gb", 5, 4, 71424, 64, 4, 4, 0, 4, 0, []int{0}},
	{"7g.141gb", 0, 8, 143360, 132, 8, 7, 0, 7, 1, []int{0}},
}

// A100-SXM4-40GB: NVIDIA MIG user guide, "Getting started with MIG"
// (nvidia-smi mig -lgip and -lgipp; tests/unit/data/gpu/public/a100-sxm4-40gb/
// nvdocs-lgipp.txt): 4.75, 9.62, 19.50, 39.25 GiB = 4864, 9856, 19968, 40192 MiB.
var a100Rows = []lgipRow{
	{"1g.5gb", 19, 1, 4864, 14, 1, 0, 0, 0, 0, []int{0, 1, 2, 3, 4, 5, 6}},
	{"1g.5gb+me", 20, 1, 4864, 14, 1, 1, 0, 1, 1, []int{0, 1, 2, 3, 4, 5, 6}},
	{"1g.10gb", 15, 2, 9856, 14, 1, 1, 0, 0, 0, []int{0, 2, 4, 6}},
	{"2g.10gb", 14, 2, 9856, 28, 2, 1, 0, 0, 0, []int{0, 2, 4}},
	{"3g.20gb", 9, 4, 19968, 42, 3, 2, 0, 0, 0, []int{0, 4}},
	{"4g.20gb", 5, 4, 19968, 56, 4, 2, 0, 0, 0, []int{0}},
	{"7g.40gb", 0, 8, 40192, 98, 7, 5, 0, 1, 1, []int{0}},
}

// expectedShape is the partitionable shape NVIDIA's driver publishes for one
// GPU with these -lgip rows, written from the rules of its source
// (kubernetes-sigs/dra-driver-nvidia-gpu 95932046683719c43b6a0dd9613c2e5aad5d6703,
// cmd/gpu-kubelet-plugin/partitions.go, nvlib.go inspectMigProfilesAndPlacements,
// mig.go): counters "multiprocessors", "copy-engines", "decoders", "encoders",
// "jpeg-engines", "ofa-engines", "memory" at the per-dimension maximum of the
// profiles plus "memory-slice-<i>"=1 for the largest placement size; a MIG device
// per row and placement, named gpu-<minor>-mig-<name without dots, + as ->-<id>-<start>,
// consuming its row and the memory slices of its placement.
type expectedShape struct {
	counters map[string]string            // counter -> quantity
	devices  map[string]map[string]string // device -> consumed counter -> quantity
	capacity map[string]map[string]string // device -> capacity -> quantity
	profile  map[string]string            // MIG device -> profile attribute
}

// memQuantity is MiB as the published quantity of bytes prints (16Gi, 33280Mi).
func memQuantity(mib int64) string {
	return resource.NewQuantity(mib*1024*1024, resource.BinarySI).String()
}

func rowCounters(r lgipRow) map[string]string {
	return map[string]string{
		"multiprocessors": fmt.Sprint(r.sm), "copy-engines": fmt.Sprint(r.ce),
		"decoders": fmt.Sprint(r.dec), "encoders": fmt.Sprint(r.enc),
		"jpeg-engines": fmt.Sprint(r.jpeg), "ofa-engines": fmt.Sprint(r.ofa),
		"memory": memQuantity(r.memMiB),
	}
}

func rowCapacity(r lgipRow) map[string]string {
	return map[string]string{
		"multiprocessors": fmt.Sprint(r.sm), "copyEngines": fmt.Sprint(r.ce),
		"decoders": fmt.Sprint(r.dec), "encoders": fmt.Sprint(r.enc),
		"jpegEngines": fmt.Sprint(r.jpeg), "ofaEngines": fmt.Sprint(r.ofa),
		"memory": memQuantity(r.memMiB),
	}
}

func expectShape(minor int, rows []lgipRow, withGPU bool) expectedShape {
	e := expectedShape{
		counters: map[string]string{}, devices: map[string]map[string]string{},
		capacity: map[string]map[string]string{}, profile: map[string]string{},
	}
	var top lgipRow
	slices := 0
	for _, r := range rows {
		top.sm, top.ce, top.dec = max(top.sm, r.sm), max(top.ce, r.ce), max(top.dec, r.dec)
		top.enc, top.jpeg, top.ofa = max(top.enc, r.enc), max(top.jpeg, r.jpeg), max(top.ofa, r.ofa)
		top.memMiB = max(top.memMiB, r.memMiB)
		slices = max(slices, r.slices)
		for _, start := range r.placements {
			name := fmt.Sprintf("gpu-%d-mig-%s-%d-%d", minor,
				strings.ReplaceAll(strings.ReplaceAll(r.name, ".", ""), "+", "-"), r.id, start)
			c := rowCounters(r)
			for i := start; i < start+r.slices; i++ {
				c[fmt.Sprintf("memory-slice-%d", i)] = "1"
			}
			e.devices[name] = c
			e.capacity[name] = rowCapacity(r)
			e.profile[name] = r.name
		}
	}
	e.counters = rowCounters(top)
	for i := 0; i < slices; i++ {
		e.counters[fmt.Sprintf("memory-slice-%d", i)] = "1"
	}
	if withGPU {
		gpu := fmt.Sprintf("gpu-%d", minor)
		e.devices[gpu] = e.counters
		e.capacity[gpu] = rowCapacity(top)
	}
	return e
}

func counterStrings(m map[string]resourceapi.Counter) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v.Value.String()
	}
	return out
}

func capacityStrings(m map[resourceapi.QualifiedName]resourceapi.DeviceCapacity) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[string(k)] = v.Value.String()
	}
	return out
}

func checkShape(t *testing.T, res *Result, minor int, g state.GPU, want expectedShape) {
	t.Helper()
	setName := fmt.Sprintf("gpu-%d-counter-set", minor)
	var set *resourceapi.CounterSet
	for i := range res.CounterSets {
		if res.CounterSets[i].Name == setName {
			set = &res.CounterSets[i]
		}
	}
	if set == nil {
		t.Fatalf("no counter set %s in %v", setName, res.CounterSets)
	}
	if got := counterStrings(set.Counters); sortedMap(got) != sortedMap(want.counters) {
		t.Errorf("counter set %s:\n got %s\nwant %s", setName, sortedMap(got), sortedMap(want.counters))
	}
	prefix := fmt.Sprintf("gpu-%d", minor)
	seen := map[string]bool{}
	for _, d := range res.Devices {
		if d.Name != prefix && !strings.HasPrefix(d.Name, prefix+"-") {
			continue
		}
		seen[d.Name] = true
		wantC, ok := want.devices[d.Name]
		if !ok {
			t.Errorf("unexpected device %s", d.Name)
			continue
		}
		if len(d.ConsumesCounters) != 1 || d.ConsumesCounters[0].CounterSet != setName {
			t.Errorf("%s consumes %v, want one consumption of %s", d.Name, d.ConsumesCounters, setName)
			continue
		}
		if got := counterStrings(d.ConsumesCounters[0].Counters); sortedMap(got) != sortedMap(wantC) {
			t.Errorf("%s consumes:\n got %s\nwant %s", d.Name, sortedMap(got), sortedMap(wantC))
		}
		if got := capacityStrings(d.Capacity); sortedMap(got) != sortedMap(want.capacity[d.Name]) {
			t.Errorf("%s capacity:\n got %s\nwant %s", d.Name, sortedMap(got), sortedMap(want.capacity[d.Name]))
		}
		attrs := flatten(d).Attributes
		if profile, isMIG := want.profile[d.Name]; isMIG {
			wantA := map[string]string{"type": "string:mig", "profile": "string:" + profile,
				"parentUUID": "string:" + g.UUID}
			for k, v := range wantA {
				if attrs[k] != v {
					t.Errorf("%s attribute %s = %q, want %q", d.Name, k, attrs[k], v)
				}
			}
			if _, has := attrs["uuid"]; has {
				t.Errorf("%s has a uuid; a MIG device that does not exist yet has none", d.Name)
			}
			info := res.Infos[d.Name]
			if info.PrepareError != "" || info.DynamicMIG == nil {
				t.Errorf("%s: Info.PrepareError = %q, DynamicMIG = %v", d.Name, info.PrepareError, info.DynamicMIG)
			} else if got := MIGDeviceName(g.Minor, profile, info.DynamicMIG.GIProfileID, info.DynamicMIG.PlacementStart); got != d.Name {
				t.Errorf("%s: DynamicMIG %+v names %s", d.Name, *info.DynamicMIG, got)
			}
		} else if attrs["type"] != "string:gpu" || attrs["uuid"] != "string:"+g.UUID {
			t.Errorf("%s attributes %v", d.Name, attrs)
		}
	}
	for name := range want.devices {
		if !seen[name] {
			t.Errorf("device %s missing", name)
		}
	}
}

func TestDynamicH200Shape(t *testing.T) {
	g := h200(0, 0, h200UUID, h200BusID)
	res, err := BuildDynamic(newState(g))
	if err != nil {
		t.Fatal(err)
	}
	want := expectShape(0, h200Rows, true)
	// 1 full GPU + 7 + 7 + 4 + 3 + 2 + 1 + 1 MIG devices; 7 dimensions + 8 memory slices.
	if len(want.devices) != 26 || len(want.counters) != 15 || len(res.Devices) != 26 {
		t.Fatalf("devices: want 26, table gives %d, built %d; counters: want 15, table gives %d",
			len(want.devices), len(res.Devices), len(want.counters))
	}
	if want.counters["memory"] != "140Gi" || want.counters["multiprocessors"] != "132" {
		t.Fatalf("H200 counters %v", want.counters)
	}
	checkShape(t, res, 0, g, want)
	if len(res.CounterSets) != 1 || len(res.DeviceGroups) != 1 || len(res.DeviceGroups[0]) != 26 {
		t.Fatalf("counter sets %d, device groups %d", len(res.CounterSets), len(res.DeviceGroups))
	}
	got := names(res.DeviceGroups[0])
	if !sort.StringsAreSorted(got) || got[0] != "gpu-0" {
		t.Errorf("devices of the GPU are not sorted by name: %v", got)
	}
	me := "gpu-0-mig-1g18gb-me-20-3"
	if _, ok := want.devices[me]; !ok || res.Infos[me].Profile != "1g.18gb+me" {
		t.Errorf("%s missing or wrong: %+v", me, res.Infos[me])
	}
	if res.Infos["gpu-0"].PrepareError != "" {
		t.Errorf("full GPU with MIG disabled must be preparable: %q", res.Infos["gpu-0"].PrepareError)
	}
}

func TestDynamicTwoH200sMIGEnabled(t *testing.T) {
	// Minor order differs from PCI order: groups and counter sets follow PCI bus ID.
	a := h200(0, 1, h200UUID, h200BusID2)
	b := h200(1, 0, h200UUID2, h200BusID)
	a.MIGModeCurrent, a.MIGModePending = state.MIGEnabled, state.MIGEnabled
	a.GPUInstances = []state.GPUInstance{gi1g18(9, 0, "MIG-aaaaaaaa-0000-4000-8000-000000000001")}
	res, err := BuildDynamic(newState(a, b))
	if err != nil {
		t.Fatal(err)
	}
	checkShape(t, res, 1, a, expectShape(1, h200Rows, true)) // Hopper: full GPU even with MIG on
	checkShape(t, res, 0, b, expectShape(0, h200Rows, true))
	if res.CounterSets[0].Name != "gpu-0-counter-set" || res.DeviceGroups[0][0].Name != "gpu-0" {
		t.Errorf("first group/counter set is not the GPU at 0000:19:00.0")
	}
	if res.Infos["gpu-1"].PrepareError != "the GPU holds 1 GPU instances; the full GPU is handed out only when it holds none" {
		t.Errorf("full GPU holding a GPU instance: PrepareError %q", res.Infos["gpu-1"].PrepareError)
	}
	if res.Infos["gpu-0"].PrepareError != "" {
		t.Errorf("full GPU without GPU instances: PrepareError %q", res.Infos["gpu-0"].PrepareError)
	}
}

func a100(migOn bool) state.GPU {
	mode := state.MIGDisabled
	if migOn {
		mode = state.MIGEnabled
	}
	return state.GPU{
		Index: 0, Minor: 0, UUID: h200UUID, Name: "NVIDIA A100-SXM4-40GB", Brand: "Nvidia",
		Architecture: "Ampere", ComputeCapability: "8.0", PCIBusID: h200BusID, MemoryMiB: 40960,
		MIGCapable: true, MIGModeCurrent: mode, MIGModePending: mode,
	}
}

func TestDynamicA100Shape(t *testing.T) {
	g := a100(false)
	res, err := BuildDynamic(newState(g))
	if err != nil {
		t.Fatal(err)
	}
	want := expectShape(0, a100Rows, true)
	if len(res.Devices) != 26 || want.counters["memory"] != "40192Mi" || memQuantity(16384) != "16Gi" {
		t.Fatalf("devices %d, memory counter %s", len(res.Devices), want.counters["memory"])
	}
	checkShape(t, res, 0, g, want)

	// Ampere cannot toggle MIG without a reset: with MIG on, no full GPU device,
	// the counter set stays.
	g = a100(true)
	res, err = BuildDynamic(newState(g))
	if err != nil {
		t.Fatal(err)
	}
	checkShape(t, res, 0, g, expectShape(0, a100Rows, false))
	if _, ok := res.Infos["gpu-0"]; ok || len(res.Devices) != 25 {
		t.Errorf("A100 with MIG enabled: %d devices, gpu-0 published: %v", len(res.Devices), ok)
	}
}

// Every GPU model of the tables: the counter set fits the API limits, every
// device consumes only counters of its GPU's set and no more than the set
// holds, the full GPU consumes all of them, and every placement lies inside
// the GPU's memory slices, aligned to its size as -lgipp lists them.
func TestDynamicEveryModelIsConsistent(t *testing.T) {
	models, err := loadModels()
	if err != nil || len(models) < 20 {
		t.Fatalf("models: %d, %v", len(models), err)
	}
	for _, m := range models {
		t.Run(m.Names[0], func(t *testing.T) {
			g := state.GPU{
				Index: 0, Minor: 0, UUID: h200UUID, Name: m.Names[0], Brand: "Nvidia",
				Architecture: m.Architecture, ComputeCapability: "9.0", PCIBusID: h200BusID,
				MemoryMiB: 1024, MIGCapable: true, MIGModeCurrent: state.MIGDisabled,
			}
			res, err := BuildDynamic(newState(g))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.CounterSets) != 1 {
				t.Fatalf("counter sets %d", len(res.CounterSets))
			}
			set := res.CounterSets[0].Counters
			if len(set) > resourceapi.ResourceSliceMaxCountersPerCounterSet {
				t.Errorf("%d counters, API limit %d", len(set), resourceapi.ResourceSliceMaxCountersPerCounterSet)
			}
			slices := 0
			for name := range set {
				if strings.HasPrefix(name, "memory-slice-") {
					slices++
				}
			}
			if slices != m.TotalSlices {
				t.Errorf("%d memory-slice counters, the GPU has %d memory slices", slices, m.TotalSlices)
			}
			for _, d := range res.Devices {
				used := d.ConsumesCounters[0].Counters
				if d.Name == "gpu-0" && sortedMap(counterStrings(used)) != sortedMap(counterStrings(set)) {
					t.Errorf("full GPU does not consume the whole set")
				}
				for name, c := range used {
					have, ok := set[name]
					if !ok {
						t.Errorf("%s consumes %s, not in the set", d.Name, name)
					} else if c.Value.Cmp(have.Value) > 0 {
						t.Errorf("%s consumes %s=%s, the set holds %s", d.Name, name, c.Value.String(), have.Value.String())
					}
				}
			}
			for _, p := range m.Profiles {
				for _, start := range p.Placements {
					if start < 0 || start+p.Slices > m.TotalSlices || start%p.Slices != 0 {
						t.Errorf("%s placement %d:%d outside or unaligned in %d slices",
							p.Name, start, p.Slices, m.TotalSlices)
					}
				}
			}
		})
	}
}

func TestDynamicFallsBackWithoutMIGCapableGPU(t *testing.T) {
	g := h200(0, 0, h200UUID, h200BusID)
	g.MIGCapable = false
	g.MIGModeCurrent, g.MIGModePending = state.MIGNotAvail, state.MIGNotAvail
	static := mustBuild(t, newState(g))
	res, err := BuildDynamic(newState(g))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.CounterSets) != 0 || fmt.Sprint(names(res.Devices)) != fmt.Sprint(names(static.Devices)) ||
		sortedMap(flatten(res.Devices[0]).Capacity) != sortedMap(flatten(static.Devices[0]).Capacity) {
		t.Errorf("fallback differs from static: %v %v", names(res.Devices), res.CounterSets)
	}
}

func TestCounterName(t *testing.T) {
	for in, want := range map[string]string{
		"multiprocessors": "multiprocessors", "copyEngines": "copy-engines",
		"jpegEngines": "jpeg-engines", "ofaEngines": "ofa-engines", "memory": "memory",
	} {
		if got := CounterName(in); got != want {
			t.Errorf("CounterName(%q) = %q, want %q", in, got, want)
		}
	}
	if q := resource.NewQuantity(143360*1024*1024, resource.BinarySI); q.String() != "140Gi" {
		t.Errorf("quantity %s", q.String())
	}
}
