package state

import (
	"strings"
	"testing"
)

// The example of lab/gpu-simulator/README.md (schema 1), with a concrete MIG UUID.
const readmeExample = `{
  "schema": 1,
  "simulator": "gpufleet GPU simulator",
  "driver_version": "580.159.04",
  "cuda_version": "13.0",
  "gpus": [
    {
      "index": 0,
      "minor": 0,
      "uuid": "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90",
      "serial": "1650000000001",
      "name": "NVIDIA H200",
      "brand": "Nvidia",
      "architecture": "Hopper",
      "compute_capability": "9.0",
      "pci_bus_id": "00000000:19:00.0",
      "memory_mib": 143771,
      "mig_capable": true,
      "mig_mode_current": "Disabled",
      "mig_mode_pending": "Disabled",
      "gpu_instances": [
        {
          "id": 1,
          "profile": "1g.18gb",
          "profile_id": 19,
          "placement_start": 0,
          "placement_size": 1,
          "memory_mib": 16384,
          "multiprocessors": 16,
          "copy_engines": 1,
          "decoders": 1,
          "encoders": 0,
          "jpeg_engines": 1,
          "ofa_engines": 0,
          "compute_instances": [
            {"id": 0, "profile": "1g.18gb", "profile_id": 0, "multiprocessors": 16,
             "uuid": "MIG-5c1e0e7a-3f1b-5d8e-a1c2-0b9d8e7f6a50"}
          ]
        }
      ],
      "processes": [{"pid": 4242, "name": "python3", "used_memory_mib": 1024}]
    }
  ]
}`

func TestParseReadmeExample(t *testing.T) {
	s, err := Parse([]byte(readmeExample))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	g := s.GPUs[0]
	if g.MemoryMiB != 143771 || g.PCIBusID != "00000000:19:00.0" || g.MIGEnabled() {
		t.Fatalf("gpu = %+v", g)
	}
	gi := g.GPUInstances[0]
	if gi.ProfileID != 19 || gi.PlacementSize != 1 || gi.JPEGEngines != 1 || gi.ComputeInstances[0].UUID == "" {
		t.Fatalf("gpu instance = %+v", gi)
	}
	if g.Processes[0].UsedMemoryMiB != 1024 {
		t.Fatalf("process = %+v", g.Processes[0])
	}
}

func TestValidateNamesFieldAndValue(t *testing.T) {
	bad := strings.Replace(readmeExample, `"schema": 1`, `"schema": 2`, 1)
	bad = strings.Replace(bad, `"mig_mode_current": "Disabled"`, `"mig_mode_current": "On"`, 1)
	bad = strings.Replace(bad, `"uuid": "GPU-1f6a`, `"uuid": "1f6a`, 1)
	_, err := Parse([]byte(bad))
	if err == nil {
		t.Fatal("Parse accepted a bad state")
	}
	for _, want := range []string{"schema=2", `gpus[0].mig_mode_current="On"`, `gpus[0].uuid="1f6a`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestParseRejectsBrokenJSON(t *testing.T) {
	if _, err := Parse([]byte(`{"schema": 1,`)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("err = %v", err)
	}
}

func TestAddressingModeAndPCIeRootAreOptionalAndChecked(t *testing.T) {
	s, err := Parse([]byte(strings.Replace(readmeExample, `"memory_mib": 143771,`,
		`"memory_mib": 143771, "pcie_root": "pci0000:17", "addressing_mode": "None",`, 1)))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if g := s.GPUs[0]; g.PCIeRoot != "pci0000:17" || g.AddressingMode != "None" {
		t.Fatalf("gpu = %+v", g)
	}
	bad := strings.Replace(readmeExample, `"memory_mib": 143771,`,
		`"memory_mib": 143771, "pcie_root": "0000:17", "addressing_mode": "none",`, 1)
	_, err = Parse([]byte(bad))
	for _, want := range []string{`gpus[0].pcie_root="0000:17"`, `gpus[0].addressing_mode="none"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

func TestDriverLoadedIsOptionalAndAbsentIsLoaded(t *testing.T) {
	for _, c := range []struct {
		field string
		want  bool
	}{{"", true}, {`"driver_loaded": true,`, true}, {`"driver_loaded": false,`, false}} {
		s, err := Parse([]byte(strings.Replace(readmeExample, `"gpus": [`, c.field+`"gpus": [`, 1)))
		if err != nil {
			t.Fatalf("%q: Parse: %v", c.field, err)
		}
		if got := s.DriverLoaded(); got != c.want {
			t.Errorf("%q: DriverLoaded() = %v, want %v", c.field, got, c.want)
		}
	}
}

func TestDeviceFileIsBesideTheStateFile(t *testing.T) {
	got := DeviceFilePath("/var/lib/gpufleet-gpu-simulator/state.json")
	if want := "/var/lib/gpufleet-gpu-simulator/dev/nvidiactl"; got != want {
		t.Fatalf("DeviceFilePath = %q, want %q", got, want)
	}
}
