package deviceplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/driver"
)

// CDI naming follows NVIDIA's device plugin with deviceListStrategy cdi-cri
// (k8s-device-plugin v0.17, cmd/nvidia-device-plugin/plugin-manager.go and
// internal/cdi/cdi.go): vendor "k8s.device-plugin.nvidia.com", class "gpu", one
// spec file "<vendor>-<class>.json" in the CDI root (container-device-interface
// GenerateNameForSpec), devices named by the device ID strategy "uuid" (the
// default), so that Allocate hands the kubelet "k8s.device-plugin.nvidia.com/gpu=GPU-...".
// The node's own spec of kind nvidia.com/gpu (nvidia-ctk cdi generate) is
// another vendor's file and is left alone.
const (
	CDIVendor = "k8s.device-plugin.nvidia.com"
	CDIClass  = "gpu"
	CDIKind   = CDIVendor + "/" + CDIClass
)

// CDISpecPath is the spec file of the simulated GPUs under cdiRoot.
func CDISpecPath(cdiRoot string) string {
	return filepath.Join(cdiRoot, CDIVendor+"-"+CDIClass+".json")
}

// CDIDeviceID is the fully qualified CDI device ID of the GPU with this UUID.
func CDIDeviceID(uuid string) string { return CDIKind + "=" + uuid }

// DeviceFilePath is the host file describing one GPU (device name gpu-<minor>).
func DeviceFilePath(devicesDir, device string) string { return filepath.Join(devicesDir, device) }

// DeviceFileContent is the text of a GPU's device file: "key=value" lines, those
// of the DRA mode's file (driver/cdi.go DeviceFileContent) that do not name a
// claim, with the resource name in place of the driver and pool.
func DeviceFileContent(g devices.Info) string {
	lines := []string{
		"# gpufleet GPU simulator: simulated device allocated to this container",
		"resource=" + ResourceName,
		"device=" + g.Name,
		"type=" + g.Type,
		"uuid=" + g.UUID,
		"productName=" + g.ProductName,
		"pciBusID=" + g.PCIBusID,
		fmt.Sprintf("memoryMiB=%d", g.MemoryMiB),
	}
	return strings.Join(lines, "\n") + "\n"
}

// BuildCDISpec is the CDI spec of the GPUs: one device per GPU, named by its
// UUID, whose edits are those the DRA mode gives a whole GPU (driver.BuildCDISpec):
// GPUFLEET_SIMULATED_GPU=<device name>, the device file at
// /run/gpufleet-gpu-simulator/devices/<device name> and at
// /run/gpufleet-gpu-simulator/device, and the createContainer hook of
// nvidia-cdi-hook at hookPath. NVIDIA_VISIBLE_DEVICES is left to the Allocate
// response (the list of every allocated UUID, as NVIDIA's plugin sets it): CDI
// edits are applied after the container's environment and one variable per device
// would leave a container given several GPUs with the last UUID only.
func BuildCDISpec(devicesDir, hookPath string, gpus []devices.Info) *cdispec.Spec {
	spec := &cdispec.Spec{Version: driver.CDIVersion, Kind: CDIKind, Devices: []cdispec.Device{}}
	for _, g := range gpus {
		hostFile := DeviceFilePath(devicesDir, g.Name)
		ro := []string{"ro", "nosuid", "nodev", "bind"}
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name: g.UUID,
			ContainerEdits: cdispec.ContainerEdits{
				Env: []string{driver.EnvSimulatedGPU + "=" + g.Name},
				Mounts: []*cdispec.Mount{
					{HostPath: hostFile, ContainerPath: driver.ContainerDir + "/devices/" + g.Name, Type: "bind", Options: ro},
					{HostPath: hostFile, ContainerPath: driver.ContainerDir + "/device", Type: "bind", Options: ro},
				},
				Hooks: []*cdispec.Hook{driver.CDIHook(hookPath, g.Name)},
			},
		})
	}
	return spec
}

// writeFiles writes the device file of every GPU, then the CDI spec (so that the
// spec never names a missing file), then removes the device files of GPUs gone from
// the state. With no GPU the spec file is removed: a CDI spec must hold a device.
func writeFiles(cdiRoot, devicesDir, hookPath string, gpus []devices.Info) error {
	keep := map[string]bool{}
	for _, g := range gpus {
		keep[g.Name] = true
		if err := driver.WriteFileAtomic(DeviceFilePath(devicesDir, g.Name), []byte(DeviceFileContent(g)), 0o644); err != nil {
			return fmt.Errorf("write device file: %w", err)
		}
	}
	if len(gpus) == 0 {
		if err := os.Remove(CDISpecPath(cdiRoot)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove CDI spec: %w", err)
		}
	} else {
		data, err := json.MarshalIndent(BuildCDISpec(devicesDir, hookPath, gpus), "", "  ")
		if err != nil {
			return err
		}
		if err := driver.WriteFileAtomic(CDISpecPath(cdiRoot), append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("write CDI spec: %w", err)
		}
	}
	entries, err := os.ReadDir(devicesDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if !keep[e.Name()] && !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			if err := os.Remove(filepath.Join(devicesDir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove device file: %w", err)
			}
		}
	}
	return nil
}
