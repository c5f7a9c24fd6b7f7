package metrics

import (
	"strings"
	"testing"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/driver"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// Two H200s: GPU 0 whole, 85% busy, a process holding 1024 MiB, prepared for claim
// team-a/train; GPU 1 with MIG on and one 1g.18gb device prepared for team-b/nb.
const twoGPUs = `{
  "schema": 1, "simulator": "gpufleet GPU simulator",
  "driver_version": "580.159.04", "cuda_version": "13.0",
  "gpus": [
    {"index": 0, "minor": 0, "uuid": "GPU-aaaa", "serial": "1", "name": "NVIDIA H200",
     "brand": "Nvidia", "architecture": "Hopper", "compute_capability": "9.0",
     "pci_bus_id": "00000000:19:00.0", "memory_mib": 143771, "mig_capable": true,
     "mig_mode_current": "Disabled", "mig_mode_pending": "Disabled",
     "utilization_percent": 85, "gpu_instances": [],
     "processes": [{"pid": 4242, "name": "python3", "used_memory_mib": 1024}]},
    {"index": 1, "minor": 1, "uuid": "GPU-bbbb", "serial": "2", "name": "NVIDIA H200",
     "brand": "Nvidia", "architecture": "Hopper", "compute_capability": "9.0",
     "pci_bus_id": "00000000:3B:00.0", "memory_mib": 143771, "mig_capable": true,
     "mig_mode_current": "Enabled", "mig_mode_pending": "Enabled",
     "gpu_instances": [
       {"id": 9, "profile": "1g.18gb", "profile_id": 19, "placement_start": 6,
        "placement_size": 1, "memory_mib": 16384, "multiprocessors": 16, "copy_engines": 1,
        "decoders": 1, "encoders": 0, "jpeg_engines": 1, "ofa_engines": 0,
        "compute_instances": [{"id": 0, "profile": "1g.18gb", "profile_id": 0,
          "multiprocessors": 16, "uuid": "MIG-cccc"}]}],
     "processes": []}
  ]
}`

func TestRenderNamesLabelsAndValues(t *testing.T) {
	s, err := state.Parse([]byte(twoGPUs))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var b strings.Builder
	prepared := map[string]driver.ClaimRef{
		"gpu-0":                  {Namespace: "team-a", Name: "train"},
		"gpu-1-mig-1g18gb-19-6":  {Namespace: "team-b", Name: "nb"},
		"gpu-7-not-on-this-node": {Namespace: "x", Name: "y"},
	}
	if err := Render(&b, s, "w1", prepared); err != nil {
		t.Fatalf("Render: %v", err)
	}
	out := b.String()
	gpu0 := `gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:19:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="w1",` +
		`dra_claim_name="train",dra_claim_namespace="team-a",dra_driver_name="gpu.nvidia.com",dra_pool_name="w1",dra_device_name="gpu-0"`
	mig := `gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:3B:00.0",device="nvidia1",modelName="NVIDIA H200",Hostname="w1",` +
		`GPU_I_PROFILE="1g.18gb",GPU_I_ID="9",dra_claim_name="nb",dra_claim_namespace="team-b",dra_driver_name="gpu.nvidia.com",` +
		`dra_pool_name="w1",dra_device_name="gpu-1-mig-1g18gb-19-6",dra_mig_profile="1g.18gb",dra_mig_device_uuid="MIG-cccc"`
	for _, want := range []string{
		"# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
		"DCGM_FI_DEV_GPU_UTIL{" + gpu0 + "} 85",
		"DCGM_FI_PROF_GR_ENGINE_ACTIVE{" + gpu0 + "} 0.85",
		"DCGM_FI_DEV_FB_USED{" + gpu0 + "} 1024",
		"DCGM_FI_DEV_FB_FREE{" + gpu0 + "} 142747",
		"DCGM_FI_PROF_GR_ENGINE_ACTIVE{" + mig + "} 0",
		"DCGM_FI_DEV_FB_FREE{" + mig + "} 16384",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing line %q in:\n%s", want, out)
		}
	}
	// NVML reports no GPU utilization for a MIG device, nor does the exporter
	if strings.Contains(out, `DCGM_FI_DEV_GPU_UTIL{gpu="1"`) {
		t.Errorf("GPU_UTIL for a MIG-enabled GPU:\n%s", out)
	}
}

func TestUnpreparedDeviceHasNoDRALabels(t *testing.T) {
	s, err := state.Parse([]byte(twoGPUs))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var b strings.Builder
	if err := Render(&b, s, "w1", nil); err != nil {
		t.Fatalf("Render: %v", err)
	}
	if strings.Contains(b.String(), "dra_") {
		t.Errorf("DRA labels without a prepared claim:\n%s", b.String())
	}
	if !strings.Contains(b.String(), `Hostname="w1"} 85`+"\n") {
		t.Errorf("utilization of GPU 0 missing:\n%s", b.String())
	}
}

func TestUtilizationOutOfRangeIsRefused(t *testing.T) {
	bad := strings.Replace(twoGPUs, `"utilization_percent": 85`, `"utilization_percent": 120`, 1)
	_, err := state.Parse([]byte(bad))
	if err == nil || !strings.Contains(err.Error(), "gpus[0].utilization_percent=120") {
		t.Fatalf("Parse accepted utilization 120 or named it badly: %v", err)
	}
}
