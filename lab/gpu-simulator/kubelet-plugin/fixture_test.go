package main

// The ResourceSlices this plugin publishes in dynamic MIG mode, kept in the collection's
// unit test data (tests/unit/data/dra/gpusim-dynamic-mig-resourceslices.json) so that the
// Python readers of shared counters (plugins/module_utils/claims/counters.py, the fleet
// report, claims explain) are tested on the plugin's own output rather than on a
// hand-written copy: one node with an H200 and one with a B200, MIG mode disabled, as
// resource.k8s.io/v1 objects of pool generation 1 named <node>-gpu.nvidia.com-<i> (the
// API server would add a random suffix instead of <i>).
//
// GPUFLEET_UPDATE_FIXTURES=1 go test -run TestDynamicMIGSlicesFixture . writes the file;
// without it the test fails when the file differs from what the plugin publishes.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

const dynamicSlicesFixture = "../../../tests/unit/data/dra/gpusim-dynamic-mig-resourceslices.json"

// oneGPUState is a state file of one GPU without GPU instances, at the PCI address and
// root complex the simulator gives a first GPU.
func oneGPUState(name, architecture, uuid string, memoryMiB int) string {
	return fmt.Sprintf(`{"schema": 1, "simulator": "gpufleet GPU simulator",
 "driver_version": "580.159.04", "cuda_version": "13.0", "gpus": [{"index": 0, "minor": 0,
 "uuid": %q, "name": %q, "brand": "Nvidia", "architecture": %q, "compute_capability": "9.0",
 "pci_bus_id": "00000000:19:00.0", "pcie_root": "pci0000:17", "addressing_mode": "None",
 "memory_mib": %d, "mig_capable": true,
 "mig_mode_current": "Disabled", "mig_mode_pending": "Disabled", "gpu_instances": [],
 "processes": []}]}`, uuid, name, architecture, memoryMiB)
}

// publishedSlices is what the plugin publishes for the node's state file, as the API
// server serves it.
func publishedSlices(t *testing.T, node, stateJSON string) []resourceapi.ResourceSlice {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte(stateJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _, err := state.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := devices.BuildDynamic(s)
	if err != nil {
		t.Fatal(err)
	}
	pool := partitionablePoolResources(node, res).Pools[node]
	var out []resourceapi.ResourceSlice
	for i, sl := range pool.Slices {
		nodeName := node
		out = append(out, resourceapi.ResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-gpu.nvidia.com-%d", node, i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:         "gpu.nvidia.com",
				Pool:           resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
				NodeName:       &nodeName,
				Devices:        sl.Devices,
				SharedCounters: sl.SharedCounters,
			},
		})
	}
	return out
}

func TestDynamicMIGSlicesFixture(t *testing.T) {
	var slices []resourceapi.ResourceSlice
	slices = append(slices, publishedSlices(t, "h200-node",
		oneGPUState("NVIDIA H200", "Hopper", "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90", 143771))...)
	slices = append(slices, publishedSlices(t, "b200-node",
		oneGPUState("NVIDIA B200", "Blackwell", "GPU-2a7b0d3f-1c5e-4f9b-8d40-6e3f8b2c9da1", 183359))...)
	doc := map[string]any{"apiVersion": "v1", "kind": "List", "items": slices}
	want, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if os.Getenv("GPUFLEET_UPDATE_FIXTURES") == "1" {
		if err := os.WriteFile(dynamicSlicesFixture, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(dynamicSlicesFixture)
	if err != nil {
		t.Fatalf("read %s: %v (GPUFLEET_UPDATE_FIXTURES=1 go test -run %s . writes it)", dynamicSlicesFixture, err, t.Name())
	}
	if string(got) != string(want) {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
		for i := range min(len(wl), len(gl)) {
			if wl[i] != gl[i] {
				t.Fatalf("%s differs from what the plugin publishes at line %d:\n got %s\nwant %s\n(GPUFLEET_UPDATE_FIXTURES=1 go test -run %s . rewrites it)",
					dynamicSlicesFixture, i+1, gl[i], wl[i], t.Name())
			}
		}
		t.Fatalf("%s: %d lines, the plugin publishes %d", dynamicSlicesFixture, len(gl), len(wl))
	}
}
