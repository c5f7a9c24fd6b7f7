package devices

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// Values of the real H200 captured in tests/unit/data/gpu/h200-single (nvml.txt,
// smi-mig-lgip.txt, smi-mig-lgipp.txt): driver 580.159.04, CUDA 13.0, 143771 MiB,
// compute capability 9.0; GI profiles 1g.18gb (ID 19, 16384 MiB, 16 SMs, CE 1,
// DEC 1, ENC 0, JPEG 1, OFA 0, size 1), 3g.71gb (ID 9, 71424 MiB, 60 SMs, 3/3/0/3/0,
// size 4), 4g.71gb (ID 5, 71424 MiB, 64 SMs, 4/4/0/4/0, size 4).
const (
	h200UUID     = "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90"
	h200UUID2    = "GPU-2a7b0d3f-1c5e-4f9b-8d40-6e3f8b2c9da1"
	h200MemMiB   = 143771
	h200Name     = "NVIDIA H200"
	h200BusID    = "00000000:19:00.0"
	h200BusID2   = "00000000:3B:00.0"
	h200MemMiB1g = 16384
)

func h200(index, minor int, uuid, busID string) state.GPU {
	return state.GPU{
		Index: index, Minor: minor, UUID: uuid, Serial: "1650000000001", Name: h200Name,
		Brand: "Nvidia", Architecture: "Hopper", ComputeCapability: "9.0", PCIBusID: busID,
		MemoryMiB: h200MemMiB, MIGCapable: true,
		MIGModeCurrent: state.MIGDisabled, MIGModePending: state.MIGDisabled,
	}
}

func newState(gpus ...state.GPU) *state.State {
	return &state.State{
		Schema: 1, Simulator: "gpufleet GPU simulator",
		DriverVersion: "580.159.04", CUDAVersion: "13.0", GPUs: gpus,
	}
}

func gi1g18(id, start int, ciUUID string) state.GPUInstance {
	return state.GPUInstance{
		ID: id, Profile: "1g.18gb", ProfileID: 19, PlacementStart: start, PlacementSize: 1,
		MemoryMiB: h200MemMiB1g, Multiprocessors: 16, CopyEngines: 1, Decoders: 1, Encoders: 0,
		JPEGEngines: 1, OFAEngines: 0,
		ComputeInstances: []state.ComputeInstance{{ID: 0, Profile: "1g.18gb", ProfileID: 0, Multiprocessors: 16, UUID: ciUUID}},
	}
}

// flat renders a device as comparable strings: attribute -> "<type>:<value>",
// capacity -> quantity string.
type flat struct {
	Attributes map[string]string
	Capacity   map[string]string
}

func flatten(d resourceapi.Device) flat {
	f := flat{Attributes: map[string]string{}, Capacity: map[string]string{}}
	for k, v := range d.Attributes {
		switch {
		case v.StringValue != nil:
			f.Attributes[string(k)] = "string:" + *v.StringValue
		case v.VersionValue != nil:
			f.Attributes[string(k)] = "version:" + *v.VersionValue
		case v.IntValue != nil:
			f.Attributes[string(k)] = fmt.Sprintf("int:%d", *v.IntValue)
		case v.BoolValue != nil:
			f.Attributes[string(k)] = fmt.Sprintf("bool:%t", *v.BoolValue)
		default:
			f.Attributes[string(k)] = "EMPTY"
		}
	}
	for k, v := range d.Capacity {
		f.Capacity[string(k)] = v.Value.String()
	}
	return f
}

func commonH200(uuid, bdf string) map[string]string {
	return map[string]string{
		"productName":                     "string:NVIDIA H200",
		"brand":                           "string:Nvidia",
		"architecture":                    "string:Hopper",
		"cudaComputeCapability":           "version:9.0.0",
		"driverVersion":                   "version:580.159.4",
		"cudaDriverVersion":               "version:13.0.0",
		"resource.kubernetes.io/pciBusID": "string:" + bdf,
	}
}

func with(base map[string]string, extra map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func names(devs []resourceapi.Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.Name
	}
	return out
}

func mustBuild(t *testing.T, s *state.State) *Result {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("test state is invalid: %v", err)
	}
	res, err := Build(s)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return res
}

func checkDevice(t *testing.T, got resourceapi.Device, name string, want flat) {
	t.Helper()
	if got.Name != name {
		t.Errorf("device name = %q, want %q", got.Name, name)
	}
	f := flatten(got)
	if !reflect.DeepEqual(f.Attributes, want.Attributes) {
		t.Errorf("%s attributes:\n got %s\nwant %s", name, sortedMap(f.Attributes), sortedMap(want.Attributes))
	}
	if !reflect.DeepEqual(f.Capacity, want.Capacity) {
		t.Errorf("%s capacity:\n got %s\nwant %s", name, sortedMap(f.Capacity), sortedMap(want.Capacity))
	}
}

func sortedMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, " ")
}

func TestH200SevenOneG18gb(t *testing.T) {
	g := h200(0, 0, h200UUID, h200BusID)
	g.MIGModeCurrent, g.MIGModePending = state.MIGEnabled, state.MIGEnabled
	// Written out of placement order: devices come out ordered by placement.
	for _, start := range []int{6, 0, 1, 2, 3, 4, 5} {
		g.GPUInstances = append(g.GPUInstances, gi1g18(7+start, start, fmt.Sprintf("MIG-00000000-0000-4000-8000-00000000000%d", start)))
	}
	res := mustBuild(t, newState(g))

	wantNames := []string{
		"gpu-0-mig-1g18gb-19-0", "gpu-0-mig-1g18gb-19-1", "gpu-0-mig-1g18gb-19-2",
		"gpu-0-mig-1g18gb-19-3", "gpu-0-mig-1g18gb-19-4", "gpu-0-mig-1g18gb-19-5",
		"gpu-0-mig-1g18gb-19-6",
	}
	if got := names(res.Devices); !reflect.DeepEqual(got, wantNames) {
		t.Fatalf("device names = %v, want %v", got, wantNames)
	}
	for i, d := range res.Devices {
		checkDevice(t, d, wantNames[i], flat{
			Attributes: with(commonH200(h200UUID, "0000:19:00.0"), map[string]string{
				"type":       "string:mig",
				"uuid":       fmt.Sprintf("string:MIG-00000000-0000-4000-8000-00000000000%d", i),
				"parentUUID": "string:" + h200UUID,
				"profile":    "string:1g.18gb",
			}),
			Capacity: map[string]string{
				"multiprocessors":               "16",
				"copyEngines":                   "1",
				"decoders":                      "1",
				"encoders":                      "0",
				"jpegEngines":                   "1",
				"ofaEngines":                    "0",
				"memory":                        "16Gi",
				fmt.Sprintf("memorySlice%d", i): "1",
			},
		})
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings = %v, want none", res.Warnings)
	}
	info := res.Infos["gpu-0-mig-1g18gb-19-3"]
	if info.Type != TypeMIG || info.Profile != "1g.18gb" || info.ParentUUID != h200UUID || info.MemoryMiB != h200MemMiB1g {
		t.Errorf("info of gpu-0-mig-1g18gb-19-3 = %+v", info)
	}
}

func TestH200Mixed3g71gbAnd4g71gb(t *testing.T) {
	g := h200(0, 0, h200UUID, h200BusID)
	g.MIGModeCurrent, g.MIGModePending = state.MIGEnabled, state.MIGEnabled
	g.GPUInstances = []state.GPUInstance{
		{
			ID: 2, Profile: "3g.71gb", ProfileID: 9, PlacementStart: 4, PlacementSize: 4,
			MemoryMiB: 71424, Multiprocessors: 60, CopyEngines: 3, Decoders: 3, Encoders: 0, JPEGEngines: 3, OFAEngines: 0,
			ComputeInstances: []state.ComputeInstance{{ID: 0, Profile: "3g.71gb", ProfileID: 2, Multiprocessors: 60, UUID: "MIG-3a3a3a3a-0000-4000-8000-000000000003"}},
		},
		{
			ID: 1, Profile: "4g.71gb", ProfileID: 5, PlacementStart: 0, PlacementSize: 4,
			MemoryMiB: 71424, Multiprocessors: 64, CopyEngines: 4, Decoders: 4, Encoders: 0, JPEGEngines: 4, OFAEngines: 0,
			ComputeInstances: []state.ComputeInstance{{ID: 0, Profile: "4g.71gb", ProfileID: 3, Multiprocessors: 64, UUID: "MIG-4b4b4b4b-0000-4000-8000-000000000004"}},
		},
	}
	res := mustBuild(t, newState(g))
	want := []string{"gpu-0-mig-4g71gb-5-0", "gpu-0-mig-3g71gb-9-4"}
	if got := names(res.Devices); !reflect.DeepEqual(got, want) {
		t.Fatalf("device names = %v, want %v", got, want)
	}
	common := commonH200(h200UUID, "0000:19:00.0")
	checkDevice(t, res.Devices[0], want[0], flat{
		Attributes: with(common, map[string]string{
			"type": "string:mig", "uuid": "string:MIG-4b4b4b4b-0000-4000-8000-000000000004",
			"parentUUID": "string:" + h200UUID, "profile": "string:4g.71gb",
		}),
		Capacity: map[string]string{
			"multiprocessors": "64", "copyEngines": "4", "decoders": "4", "encoders": "0",
			"jpegEngines": "4", "ofaEngines": "0", "memory": "71424Mi",
			"memorySlice0": "1", "memorySlice1": "1", "memorySlice2": "1", "memorySlice3": "1",
		},
	})
	checkDevice(t, res.Devices[1], want[1], flat{
		Attributes: with(common, map[string]string{
			"type": "string:mig", "uuid": "string:MIG-3a3a3a3a-0000-4000-8000-000000000003",
			"parentUUID": "string:" + h200UUID, "profile": "string:3g.71gb",
		}),
		Capacity: map[string]string{
			"multiprocessors": "60", "copyEngines": "3", "decoders": "3", "encoders": "0",
			"jpegEngines": "3", "ofaEngines": "0", "memory": "71424Mi",
			"memorySlice4": "1", "memorySlice5": "1", "memorySlice6": "1", "memorySlice7": "1",
		},
	})
}

func TestMIGDisabledPublishesWholeGPUs(t *testing.T) {
	g0 := h200(0, 0, h200UUID, h200BusID)
	g1 := h200(1, 1, h200UUID2, h200BusID2)
	// Pending "Enabled" does not count until it becomes current (GPU reset).
	g1.MIGModePending = state.MIGEnabled
	res := mustBuild(t, newState(g1, g0))
	want := []string{"gpu-0", "gpu-1"}
	if got := names(res.Devices); !reflect.DeepEqual(got, want) {
		t.Fatalf("device names = %v, want %v", got, want)
	}
	checkDevice(t, res.Devices[0], "gpu-0", flat{
		Attributes: with(commonH200(h200UUID, "0000:19:00.0"), map[string]string{
			"type": "string:gpu", "uuid": "string:" + h200UUID,
		}),
		Capacity: map[string]string{"memory": "143771Mi"},
	})
	checkDevice(t, res.Devices[1], "gpu-1", flat{
		Attributes: with(commonH200(h200UUID2, "0000:3b:00.0"), map[string]string{
			"type": "string:gpu", "uuid": "string:" + h200UUID2,
		}),
		Capacity: map[string]string{"memory": "143771Mi"},
	})
}

func TestNonMIGGPU(t *testing.T) {
	g := state.GPU{
		Index: 0, Minor: 3, UUID: "GPU-7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f", Name: "NVIDIA L40S",
		Brand: "Nvidia", Architecture: "Ada Lovelace", ComputeCapability: "8.9",
		PCIBusID: "00000000:C1:00.0", MemoryMiB: 46068, MIGCapable: false,
		MIGModeCurrent: state.MIGNotAvail, MIGModePending: state.MIGNotAvail,
	}
	s := newState(g)
	s.DriverVersion, s.CUDAVersion = "570.86.10", "12.8"
	res := mustBuild(t, s)
	if got := names(res.Devices); !reflect.DeepEqual(got, []string{"gpu-3"}) {
		t.Fatalf("device names = %v, want [gpu-3] (named by minor, not index)", got)
	}
	checkDevice(t, res.Devices[0], "gpu-3", flat{
		Attributes: map[string]string{
			"type":                            "string:gpu",
			"uuid":                            "string:GPU-7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f",
			"productName":                     "string:NVIDIA L40S",
			"brand":                           "string:Nvidia",
			"architecture":                    "string:Ada Lovelace",
			"cudaComputeCapability":           "version:8.9.0",
			"driverVersion":                   "version:570.86.10",
			"cudaDriverVersion":               "version:12.8.0",
			"resource.kubernetes.io/pciBusID": "string:0000:c1:00.0",
		},
		Capacity: map[string]string{"memory": "46068Mi"},
	})
}

func TestMIGEnabledWithoutInstancesWarns(t *testing.T) {
	g := h200(0, 0, h200UUID, h200BusID)
	g.MIGModeCurrent = state.MIGEnabled
	res := mustBuild(t, newState(g))
	if len(res.Devices) != 0 {
		t.Fatalf("devices = %v, want none", names(res.Devices))
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "MIG mode enabled but no MIG devices") {
		t.Fatalf("warnings = %v", res.Warnings)
	}
}

func TestMediaExtensionProfileName(t *testing.T) {
	if got := MIGDeviceName(0, "1g.18gb+me", 20, 6); got != "gpu-0-mig-1g18gb-me-20-6" {
		t.Fatalf("MIGDeviceName = %q", got)
	}
}

// A compute instance narrower than its GPU instance (1c.3g.71gb in a 3g.71gb GI) is a
// layout NVIDIA's plugin cannot enumerate: Build fails and names the GPU, GI and CI.
func TestComputeInstanceSmallerThanItsGPUInstanceIsUnservable(t *testing.T) {
	g := h200(3, 2, h200UUID, h200BusID)
	g.MIGModeCurrent = state.MIGEnabled
	full := gi1g18(7, 0, "MIG-00000000-0000-4000-8000-000000000000")
	partial := state.GPUInstance{
		ID: 2, Profile: "3g.71gb", ProfileID: 9, PlacementStart: 4, PlacementSize: 4,
		MemoryMiB: 71424, Multiprocessors: 60, CopyEngines: 3, Decoders: 3, JPEGEngines: 3,
		ComputeInstances: []state.ComputeInstance{
			{ID: 1, Profile: "1c.3g.71gb", ProfileID: 0, Multiprocessors: 20, UUID: "MIG-11111111-0000-4000-8000-000000000001"},
			{ID: 0, Profile: "2c.3g.71gb", ProfileID: 1, Multiprocessors: 40, UUID: "MIG-11111111-0000-4000-8000-000000000000"},
		},
	}
	g.GPUInstances = []state.GPUInstance{partial, full}
	s := newState(g)
	if err := s.Validate(); err != nil {
		t.Fatalf("test state is invalid: %v", err)
	}
	res, err := Build(s)
	var unservable *UnservableLayoutError
	if !errors.As(err, &unservable) || res != nil {
		t.Fatalf("Build = %v, %v; want an *UnservableLayoutError", res, err)
	}
	// The first compute instance by ID: CI 0, profile 2c.3g.71gb.
	if unservable.GPUIndex != 3 || unservable.GIID != 2 || unservable.GIProfile != "3g.71gb" ||
		unservable.CIID != 0 || unservable.CIProfile != "2c.3g.71gb" {
		t.Errorf("error fields = %+v", unservable)
	}
	for _, want := range []string{"GPU 3 (" + h200UUID + ")", "CI profile 2c.3g.71gb", "GI profile 3g.71gb", "GPU instance 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// The same layout on a GPU whose MIG mode is still pending is not enumerated as MIG
// devices and is no reason to fail; a full-size CI named like its GI is servable.
func TestServableLayouts(t *testing.T) {
	g := h200(0, 0, h200UUID, h200BusID)
	g.GPUInstances = []state.GPUInstance{{
		ID: 1, Profile: "3g.71gb", ProfileID: 9, PlacementStart: 0, PlacementSize: 4,
		ComputeInstances: []state.ComputeInstance{{ID: 0, Profile: "1c.3g.71gb", UUID: "MIG-11111111-0000-4000-8000-000000000001"}},
	}}
	if err := CheckServable([]state.GPU{g}); err != nil {
		t.Errorf("MIG disabled: %v", err)
	}
	g.MIGModeCurrent = state.MIGEnabled
	g.GPUInstances[0].ComputeInstances[0].Profile = "3g.71gb"
	if err := CheckServable([]state.GPU{g}); err != nil {
		t.Errorf("full-size compute instance: %v", err)
	}
	g.GPUInstances[0].ComputeInstances[0].Profile = "1c.3g.71gb"
	if err := CheckServable([]state.GPU{g}); err == nil {
		t.Error("1c.3g.71gb accepted")
	}
}

func TestComputeSlices(t *testing.T) {
	for _, tc := range []struct {
		ci, gi string
		c, g   int
		ok     bool
	}{
		{"1c.3g.71gb", "3g.71gb", 1, 3, true},
		{"3g.71gb", "3g.71gb", 3, 3, true},
		{"", "7g.141gb", 7, 7, true},
		{"1g.18gb+me", "1g.18gb+me", 1, 1, true},
		{"x", "bogus", 0, 0, false},
	} {
		c, g, ok := ComputeSlices(tc.ci, tc.gi)
		if c != tc.c || g != tc.g || ok != tc.ok {
			t.Errorf("ComputeSlices(%q, %q) = %d, %d, %t; want %d, %d, %t", tc.ci, tc.gi, c, g, ok, tc.c, tc.g, tc.ok)
		}
	}
}

// addressingMode and resource.kubernetes.io/pcieRoot come from the state file; a MIG
// device carries its parent GPU's, as in NVIDIA's CommonAttributesMig.
func TestAddressingModeAndPCIeRootFromState(t *testing.T) {
	g := h200(0, 0, h200UUID, h200BusID)
	g.AddressingMode, g.PCIeRoot = "None", "pci0000:17"
	g2 := h200(1, 1, h200UUID2, h200BusID2)
	g2.AddressingMode, g2.PCIeRoot = "ATS", "pci0000:3a"
	g2.MIGModeCurrent = state.MIGEnabled
	g2.GPUInstances = []state.GPUInstance{gi1g18(7, 0, "MIG-00000000-0000-4000-8000-000000000000")}
	res := mustBuild(t, newState(g, g2))
	if len(res.Devices) != 2 {
		t.Fatalf("devices = %v", names(res.Devices))
	}
	for i, want := range [][2]string{{"string:None", "string:pci0000:17"}, {"string:ATS", "string:pci0000:3a"}} {
		f := flatten(res.Devices[i])
		if f.Attributes["addressingMode"] != want[0] || f.Attributes["resource.kubernetes.io/pcieRoot"] != want[1] {
			t.Errorf("%s: addressingMode=%q pcieRoot=%q, want %q %q", res.Devices[i].Name,
				f.Attributes["addressingMode"], f.Attributes["resource.kubernetes.io/pcieRoot"], want[0], want[1])
		}
	}
}

func TestSemverFromNVIDIA(t *testing.T) {
	for in, want := range map[string]string{
		"580.159.04": "580.159.4", "580.95.05": "580.95.5", "9.0": "9.0.0", "13.0": "13.0.0",
		"10": "10.0.0", "570.86.10": "570.86.10",
	} {
		got, err := SemverFromNVIDIA(in)
		if err != nil || got != want {
			t.Errorf("SemverFromNVIDIA(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "580.x", "1.2.3.4", "v580"} {
		if _, err := SemverFromNVIDIA(bad); err == nil {
			t.Errorf("SemverFromNVIDIA(%q) gave no error", bad)
		}
	}
}

func TestPCIBusIDToBDF(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:19:00.0": "0000:19:00.0", "00000000:9A:00.0": "0000:9a:00.0",
		"0000:3b:00.0": "0000:3b:00.0", "00000001:00:06.0": "0001:00:06.0",
	} {
		got, err := PCIBusIDToBDF(in)
		if err != nil || got != want {
			t.Errorf("PCIBusIDToBDF(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "19:00.0", "00000000:19:00", "00010000:19:00.0"} {
		if _, err := PCIBusIDToBDF(bad); err == nil {
			t.Errorf("PCIBusIDToBDF(%q) gave no error", bad)
		}
	}
}

func TestBadDriverVersionIsNamed(t *testing.T) {
	s := newState(h200(0, 0, h200UUID, h200BusID))
	s.DriverVersion = "580.x"
	_, err := Build(s)
	if err == nil || !strings.Contains(err.Error(), "driver_version") || !strings.Contains(err.Error(), "580.x") {
		t.Fatalf("Build error = %v, want one naming driver_version and the value", err)
	}
}
