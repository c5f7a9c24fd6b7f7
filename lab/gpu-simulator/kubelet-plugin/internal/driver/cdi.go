package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
)

// CDI naming follows the NVIDIA DRA driver (cmd/gpu-kubelet-plugin/cdi.go): vendor
// "k8s.gpu.nvidia.com", class "claim", one transient spec file per claim named
// "<vendor>-<class>_<claim UID>.json" (container-device-interface
// GenerateTransientSpecName), device names "<claim UID>-<device name>" so that a
// CDI device ID is never reused for another claim.
const (
	CDIVendor = "k8s." + devices.DriverName
	CDIClass  = "claim"
	CDIKind   = CDIVendor + "/" + CDIClass
	// CDIVersion is the CDI spec version of the per-claim specs. Every field used
	// here (env, mounts with a type, hooks, device names starting with a digit)
	// needs at most 0.5.0 (specs-go MinimumRequiredVersion; hooks are in every
	// version); 0.6.0 is kept, and containerd 1.7 and 2.x accept it.
	CDIVersion = "0.6.0"

	// ContainerDir is where a container finds the description of its devices.
	ContainerDir = "/run/gpufleet-gpu-simulator"
	// EnvSimulatedGPU names the device (ResourceSlice device name) in the container.
	EnvSimulatedGPU = "GPUFLEET_SIMULATED_GPU"
	// EnvVisibleDevices is the variable the NVIDIA container runtime reads.
	EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"

	// DefaultNVIDIACDIHookPath is where the NVIDIA DRA kubelet plugin expects
	// nvidia-cdi-hook (package nvidia-container-toolkit-base) unless told otherwise.
	DefaultNVIDIACDIHookPath = "/usr/bin/nvidia-cdi-hook"
	// HookedDir is the container directory where the createContainer hook links
	// each device file (ContainerDir/hooked/<device> -> ContainerDir/devices/<device>).
	HookedDir = ContainerDir + "/hooked"
)

// CDISpecPath is the per-claim spec file under cdiRoot.
func CDISpecPath(cdiRoot, claimUID string) string {
	return filepath.Join(cdiRoot, fmt.Sprintf("%s-%s_%s.json", CDIVendor, CDIClass, claimUID))
}

// CDIDeviceName is the CDI device name of one device of a claim.
func CDIDeviceName(claimUID, device string) string { return claimUID + "-" + device }

// CDIDeviceID is the fully qualified CDI device ID handed to the kubelet.
func CDIDeviceID(claimUID, device string) string {
	return CDIKind + "=" + CDIDeviceName(claimUID, device)
}

// ClaimDir is the host directory holding the files shown to a claim's containers.
func ClaimDir(claimsDir, claimUID string) string { return filepath.Join(claimsDir, claimUID) }

// DeviceFilePath is the host file describing one device of a claim.
func DeviceFilePath(claimsDir, claimUID, device string) string {
	return filepath.Join(ClaimDir(claimsDir, claimUID), "devices", device)
}

// DeviceFileContent is the text of a device file: "key=value" lines.
func DeviceFileContent(pool, claimNamespace, claimName, claimUID string, d PreparedDevice) string {
	lines := []string{
		"# gpufleet GPU simulator: simulated device allocated to this container",
		"driver=" + devices.DriverName,
		"pool=" + pool,
		"device=" + d.Device,
		"type=" + d.Info.Type,
		"uuid=" + d.Info.UUID,
	}
	if d.Info.Type == devices.TypeMIG {
		lines = append(lines, "parentUUID="+d.Info.ParentUUID, "profile="+d.Info.Profile)
	}
	lines = append(lines,
		"productName="+d.Info.ProductName,
		"pciBusID="+d.Info.PCIBusID,
		fmt.Sprintf("memoryMiB=%d", d.Info.MemoryMiB),
		"claim="+claimNamespace+"/"+claimName,
		"claimUID="+claimUID,
		"requests="+strings.Join(d.Requests, ","),
	)
	return strings.Join(lines, "\n") + "\n"
}

// CDIHook is the createContainer hook of one device: nvidia-cdi-hook (at
// hookPath on the node) creates, in the container's root filesystem, the symlink
// HookedDir/<device> pointing at the device file mounted at
// ContainerDir/devices/<device>, as the NVIDIA DRA driver's specs create the
// driver library links ("create-symlinks --link TARGET::LINK").
func CDIHook(hookPath, device string) *cdispec.Hook {
	return &cdispec.Hook{
		HookName: "createContainer",
		Path:     hookPath,
		Args: []string{
			"nvidia-cdi-hook", "create-symlinks",
			"--link", ContainerDir + "/devices/" + device + "::" + HookedDir + "/" + device,
		},
	}
}

// BuildCDISpec is the CDI spec of one claim. Each device injects
// NVIDIA_VISIBLE_DEVICES=<uuid>, GPUFLEET_SIMULATED_GPU=<device name> and its
// device file at /run/gpufleet-gpu-simulator/devices/<device name> and at
// /run/gpufleet-gpu-simulator/device, and a createContainer hook (CDIHook) that
// has nvidia-cdi-hook at hookPath link /run/gpufleet-gpu-simulator/hooked/<device
// name> to the file under devices/. A container given several devices sees all of them
// under devices/ and hooked/; the two variables and the "device" file then
// describe the last one (CDI replaces a variable or mount of the same name).
func BuildCDISpec(claimsDir, claimUID, hookPath string, prepared []PreparedDevice) *cdispec.Spec {
	spec := &cdispec.Spec{Version: CDIVersion, Kind: CDIKind}
	for _, d := range prepared {
		hostFile := DeviceFilePath(claimsDir, claimUID, d.Device)
		ro := []string{"ro", "nosuid", "nodev", "bind"}
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name: CDIDeviceName(claimUID, d.Device),
			ContainerEdits: cdispec.ContainerEdits{
				Env: []string{
					EnvVisibleDevices + "=" + d.Info.UUID,
					EnvSimulatedGPU + "=" + d.Device,
				},
				Mounts: []*cdispec.Mount{
					{HostPath: hostFile, ContainerPath: ContainerDir + "/devices/" + d.Device, Type: "bind", Options: ro},
					{HostPath: hostFile, ContainerPath: ContainerDir + "/device", Type: "bind", Options: ro},
				},
				Hooks: []*cdispec.Hook{CDIHook(hookPath, d.Device)},
			},
		})
	}
	return spec
}

// writeClaimFiles writes the device files and then the CDI spec of a claim.
func writeClaimFiles(cdiRoot, claimsDir, hookPath, pool, claimUID string, claim PreparedClaim) error {
	for _, d := range claim.Devices {
		content := DeviceFileContent(pool, claim.Namespace, claim.Name, claimUID, d)
		if err := WriteFileAtomic(DeviceFilePath(claimsDir, claimUID, d.Device), []byte(content), 0o644); err != nil {
			return fmt.Errorf("write device file: %w", err)
		}
	}
	data, err := json.MarshalIndent(BuildCDISpec(claimsDir, claimUID, hookPath, claim.Devices), "", "  ")
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(CDISpecPath(cdiRoot, claimUID), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write CDI spec: %w", err)
	}
	return nil
}

// CheckNVIDIACDIHook refuses a hook path that is not an executable file, as the
// NVIDIA DRA kubelet plugin refuses to start without nvidia-cdi-hook.
func CheckNVIDIACDIHook(path string) error {
	fix := "install nvidia-container-toolkit-base on the node, or set --nvidia-cdi-hook-path " +
		"(env NVIDIA_CDI_HOOK_PATH, chart value nvidiaCDIHookPath) to where nvidia-cdi-hook is"
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("nvidia-cdi-hook %s does not exist; the CDI specs of prepared claims call it when a container is created: %s", path, fix)
	}
	if err != nil {
		return fmt.Errorf("nvidia-cdi-hook %s: %w; %s", path, err, fix)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("nvidia-cdi-hook %s is not an executable file (mode %s); %s", path, fi.Mode(), fix)
	}
	return nil
}

// removeClaimFiles removes what writeClaimFiles wrote; missing files are fine.
func removeClaimFiles(cdiRoot, claimsDir, claimUID string) error {
	if err := os.Remove(CDISpecPath(cdiRoot, claimUID)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	if err := os.RemoveAll(ClaimDir(claimsDir, claimUID)); err != nil {
		return fmt.Errorf("remove claim directory: %w", err)
	}
	return nil
}
