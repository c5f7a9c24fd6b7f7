package driver

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
)

func TestBuildCDISpecHooksEveryDevice(t *testing.T) {
	uid := "0b1c2d3e-0000-4000-8000-00000000c1a1"
	prepared := []PreparedDevice{
		{Device: "gpu-0", Info: devices.Info{UUID: "GPU-0"}},
		{Device: "gpu-1", Info: devices.Info{UUID: "GPU-1"}},
	}
	spec := BuildCDISpec("/var/run/gpufleet-gpu-simulator/claims", uid, DefaultNVIDIACDIHookPath, prepared)
	if len(spec.Devices) != 2 {
		t.Fatalf("devices = %+v", spec.Devices)
	}
	for i, name := range []string{"gpu-0", "gpu-1"} {
		want := []*cdispec.Hook{{
			HookName: "createContainer",
			Path:     "/usr/bin/nvidia-cdi-hook",
			Args: []string{"nvidia-cdi-hook", "create-symlinks", "--link",
				"/run/gpufleet-gpu-simulator/devices/" + name + "::/run/gpufleet-gpu-simulator/hooked/" + name},
		}}
		got := spec.Devices[i].ContainerEdits.Hooks
		if !reflect.DeepEqual(got, want) {
			t.Errorf("device %s hooks = %+v, want %+v", name, got, want)
		}
		// The link's target is where the spec mounts the device file.
		target := strings.SplitN(got[0].Args[3], "::", 2)[0]
		if m := spec.Devices[i].ContainerEdits.Mounts[0]; m.ContainerPath != target {
			t.Errorf("device %s: hook target %s is not the mount %s", name, target, m.ContainerPath)
		}
	}
	// The hooks need no newer spec version than the one written.
	if err := cdispec.ValidateVersion(spec); err != nil {
		t.Fatalf("CDI version %s: %v", spec.Version, err)
	}
	if minimum, _ := cdispec.MinimumRequiredVersion(spec); minimum != "0.5.0" {
		t.Errorf("minimum required CDI version = %s, want 0.5.0 (device names start with a digit)", minimum)
	}
}

func TestCheckNVIDIACDIHook(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "nvidia-cdi-hook")
	if err := os.WriteFile(good, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckNVIDIACDIHook(good); err != nil {
		t.Fatalf("executable hook refused: %v", err)
	}

	missing := filepath.Join(dir, "usr", "bin", "nvidia-cdi-hook")
	err := CheckNVIDIACDIHook(missing)
	if err == nil || !strings.Contains(err.Error(), missing+" does not exist") {
		t.Fatalf("missing hook: err = %v", err)
	}
	for _, fix := range []string{"nvidia-container-toolkit-base", "--nvidia-cdi-hook-path"} {
		if !strings.Contains(err.Error(), fix) {
			t.Errorf("missing hook: err %q does not name %s", err, fix)
		}
	}

	plain := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = CheckNVIDIACDIHook(plain)
	if err == nil || !strings.Contains(err.Error(), plain+" is not an executable file (mode -rw-r--r--)") ||
		!strings.Contains(err.Error(), "nvidia-container-toolkit-base") {
		t.Fatalf("non-executable hook: err = %v", err)
	}

	if err := CheckNVIDIACDIHook(dir); err == nil || !strings.Contains(err.Error(), "is not an executable file") {
		t.Fatalf("directory as hook: err = %v", err)
	}
}
