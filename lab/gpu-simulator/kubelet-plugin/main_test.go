package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
)

const oneGPU = `{"schema": 1, "simulator": "gpufleet GPU simulator", "driver_version": "580.159.04",
 "cuda_version": "13.0", "gpus": [{"index": 0, "minor": 0,
 "uuid": "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90", "name": "NVIDIA H200", "brand": "Nvidia",
 "architecture": "Hopper", "compute_capability": "9.0", "pci_bus_id": "00000000:19:00.0",
 "memory_mib": 143771, "mig_capable": true, "mig_mode_current": "%s", "mig_mode_pending": "%s",
 "gpu_instances": [{"id": 1, "profile": "1g.18gb", "profile_id": 19, "placement_start": 0,
 "placement_size": 1, "memory_mib": 16384, "multiprocessors": 16, "copy_engines": 1, "decoders": 1,
 "encoders": 0, "jpeg_engines": 1, "ofa_engines": 0, "compute_instances": [{"id": 0,
 "profile": "1g.18gb", "profile_id": 0, "multiprocessors": 16,
 "uuid": "MIG-5c1e0e7a-3f1b-5d8e-a1c2-0b9d8e7f6a50"}]}], "processes": []}]}`

func stateWithMIG(mode string) string {
	return strings.ReplaceAll(oneGPU, "%s", mode)
}

func write(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherRepublishesOnlyOnContentChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	w := &watcher{path: path}
	t0 := time.Unix(1_700_000_000, 0)

	changed, infos, devs, err := w.poll()
	if err != nil || !changed || len(devs) != 0 || len(infos) != 0 {
		t.Fatalf("missing file: changed=%v devs=%d err=%v; want one empty publication", changed, len(devs), err)
	}
	if changed, _, _, _ = w.poll(); changed {
		t.Fatal("missing file reported as changed twice")
	}

	write(t, path, stateWithMIG("Disabled"), t0)
	changed, _, devs, err = w.poll()
	if err != nil || !changed || len(devs) != 1 || devs[0].Name != "gpu-0" {
		t.Fatalf("first read: changed=%v devs=%v err=%v", changed, devs, err)
	}
	if changed, _, _, _ = w.poll(); changed {
		t.Fatal("unchanged file reported as changed")
	}
	// Rewritten with the same content (new mtime): no republish.
	write(t, path, stateWithMIG("Disabled"), t0.Add(time.Second))
	if changed, _, _, err = w.poll(); changed || err != nil {
		t.Fatalf("same content: changed=%v err=%v", changed, err)
	}
	// MIG enabled: the MIG device replaces the GPU.
	write(t, path, stateWithMIG("Enabled"), t0.Add(2*time.Second))
	changed, infos, devs, err = w.poll()
	if err != nil || !changed || len(devs) != 1 || devs[0].Name != "gpu-0-mig-1g18gb-19-0" {
		t.Fatalf("MIG enabled: changed=%v devs=%v err=%v", changed, devs, err)
	}
	if _, ok := infos["gpu-0-mig-1g18gb-19-0"]; !ok {
		t.Fatalf("infos = %v", infos)
	}
	// A broken file is an error and leaves the last good state in place.
	write(t, path, `{"schema": 1,`, t0.Add(3*time.Second))
	if changed, _, _, err = w.poll(); changed || err == nil {
		t.Fatalf("broken file: changed=%v err=%v", changed, err)
	}
	if changed, _, _, err = w.poll(); changed || err != nil {
		t.Fatalf("the same broken file is reported once: changed=%v err=%v", changed, err)
	}
	write(t, path, stateWithMIG("Enabled"), t0.Add(4*time.Second))
	if changed, _, _, err = w.poll(); changed || err != nil {
		t.Fatalf("back to the published content: changed=%v err=%v", changed, err)
	}
}

func TestPoolResourcesSplitsAt128Devices(t *testing.T) {
	devs := make([]resourceapi.Device, 130)
	res := poolResources("node-a", devs)
	pool, ok := res.Pools["node-a"]
	if !ok || len(res.Pools) != 1 {
		t.Fatalf("pools = %v", res.Pools)
	}
	if len(pool.Slices) != 2 || len(pool.Slices[0].Devices) != 128 || len(pool.Slices[1].Devices) != 2 {
		t.Fatalf("slices = %d", len(pool.Slices))
	}
	empty := poolResources("node-a", nil)
	if s := empty.Pools["node-a"].Slices; len(s) != 1 || len(s[0].Devices) != 0 {
		t.Fatalf("empty pool slices = %v", s)
	}
}

func TestParseFlagsNeedsNodeName(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	if _, err := parseFlags([]string{}); err == nil || !strings.Contains(err.Error(), "--node-name") {
		t.Fatalf("err = %v", err)
	}
	t.Setenv("NODE_NAME", "worker-1")
	o, err := parseFlags([]string{"--state-file=/tmp/s.json", "-v=4"})
	if err != nil || o.nodeName != "worker-1" || o.stateFile != "/tmp/s.json" ||
		o.pluginDataDir != "/var/lib/kubelet/plugins/gpu.nvidia.com" ||
		o.registrarDir != "/var/lib/kubelet/plugins_registry" || o.cdiRoot != "/var/run/cdi" {
		t.Fatalf("options = %+v, %v", o, err)
	}
}

func TestNVIDIACDIHookPathFlag(t *testing.T) {
	t.Setenv("NODE_NAME", "worker-1")
	t.Setenv("NVIDIA_CDI_HOOK_PATH", "")
	o, err := parseFlags([]string{})
	if err != nil || o.cdiHookPath != "/usr/bin/nvidia-cdi-hook" {
		t.Fatalf("default: %+v, %v", o, err)
	}
	t.Setenv("NVIDIA_CDI_HOOK_PATH", "/opt/env/nvidia-cdi-hook")
	if o, err = parseFlags([]string{}); err != nil || o.cdiHookPath != "/opt/env/nvidia-cdi-hook" {
		t.Fatalf("env: %+v, %v", o, err)
	}
	if o, err = parseFlags([]string{"--nvidia-cdi-hook-path=/opt/flag/nvidia-cdi-hook"}); err != nil ||
		o.cdiHookPath != "/opt/flag/nvidia-cdi-hook" {
		t.Fatalf("flag: %+v, %v", o, err)
	}
	if o, err = parseFlags([]string{"--nvidia-cdi-hook-path="}); err != nil || o.cdiHookPath != "/usr/bin/nvidia-cdi-hook" {
		t.Fatalf("empty flag: %+v, %v", o, err)
	}
}

func TestRunRefusesToStartWithoutNVIDIACDIHook(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "nvidia-cdi-hook")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing"): " does not exist",
		plain:                         " is not an executable file",
	} {
		o := &options{
			nodeName: "worker-1", cdiHookPath: path, pollInterval: time.Second,
			// Nothing may be created or contacted before the check.
			kubeconfig: filepath.Join(dir, "no-kubeconfig"), pluginDataDir: filepath.Join(dir, "plugin"),
			registrarDir: filepath.Join(dir, "registry"), cdiRoot: filepath.Join(dir, "cdi"),
			claimsDir: filepath.Join(dir, "claims"),
		}
		err := run(o)
		if err == nil || !strings.Contains(err.Error(), path+want) || !strings.Contains(err.Error(), "--nvidia-cdi-hook-path") {
			t.Errorf("run with %s: err = %v", path, err)
		}
		if _, statErr := os.Stat(o.pluginDataDir); !os.IsNotExist(statErr) {
			t.Errorf("run with %s created %s before refusing", path, o.pluginDataDir)
		}
	}
}

// oneGPU with MIG enabled and its 1g.18gb GPU instance turned into a 3g.71gb one that
// holds a 1c.3g.71gb compute instance: a layout NVIDIA's plugin cannot enumerate.
func unservableState() string {
	s := stateWithMIG("Enabled")
	s = strings.Replace(s, `"profile": "1g.18gb", "profile_id": 19, "placement_start": 0,
 "placement_size": 1`, `"profile": "3g.71gb", "profile_id": 9, "placement_start": 0,
 "placement_size": 4`, 1)
	return strings.Replace(s, `"profile": "1g.18gb", "profile_id": 0`, `"profile": "1c.3g.71gb", "profile_id": 0`, 1)
}

func startOptions(t *testing.T, stateFile string) *options {
	t.Helper()
	dir := t.TempDir()
	hook := filepath.Join(dir, "nvidia-cdi-hook")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &options{
		nodeName: "worker-1", cdiHookPath: hook, pollInterval: time.Second, stateFile: stateFile,
		kubeconfig: filepath.Join(dir, "no-kubeconfig"), pluginDataDir: filepath.Join(dir, "plugin"),
		registrarDir: filepath.Join(dir, "registry"), cdiRoot: filepath.Join(dir, "cdi"),
		claimsDir: filepath.Join(dir, "claims"),
	}
}

func TestRunRefusesToStartOnAComputeInstanceSmallerThanItsGPUInstance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	write(t, path, unservableState(), time.Now())
	o := startOptions(t, path)
	err := run(o)
	for _, want := range []string{"GPU 0 (GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90)", "CI profile 1c.3g.71gb", "GI profile 3g.71gb", path} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("run: err = %v; want it to name %q", err, want)
		}
	}
	if _, statErr := os.Stat(o.pluginDataDir); !os.IsNotExist(statErr) {
		t.Errorf("run created %s before refusing", o.pluginDataDir)
	}
	// A servable layout passes this check and fails later, at the missing kubeconfig.
	write(t, path, stateWithMIG("Enabled"), time.Now().Add(time.Second))
	if err := run(o); err == nil || strings.Contains(err.Error(), "CI profile") {
		t.Errorf("run with a servable layout: err = %v; want the kubeconfig error", err)
	}
}

// The binary exits 1 and logs the reason, as NVIDIA's plugin does on this layout.
func TestMainExitsNonZeroOnUnservableLayout(t *testing.T) {
	if os.Getenv("GPUSIM_RUN_MAIN") == "1" {
		os.Args = append([]string{"gpusim-kubelet-plugin"}, strings.Fields(os.Getenv("GPUSIM_MAIN_ARGS"))...)
		main()
		return
	}
	path := filepath.Join(t.TempDir(), "state.json")
	write(t, path, unservableState(), time.Now())
	o := startOptions(t, path)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainExitsNonZeroOnUnservableLayout$")
	cmd.Env = append(os.Environ(), "GPUSIM_RUN_MAIN=1", "GPUSIM_MAIN_ARGS=--node-name=worker-1 --state-file="+path+
		" --nvidia-cdi-hook-path="+o.cdiHookPath+" --kubeconfig="+o.kubeconfig+" --plugin-data-dir="+o.pluginDataDir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "gpusim-kubelet-plugin stopped") || !strings.Contains(string(out), "CI profile 1c.3g.71gb") {
		t.Errorf("log does not name the layout:\n%s", out)
	}
}

func TestModeFlag(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	t.Setenv("GPUFLEET_GPUSIM_MODE", "")
	t.Setenv("KUBELET_SOCKET", "")
	// The device plugin needs no node name; its sockets and files have the defaults of a node.
	o, err := parseFlags([]string{"--mode=device-plugin"})
	if err != nil || o.mode != "device-plugin" || o.kubeletSocket != "/var/lib/kubelet/device-plugins/kubelet.sock" ||
		o.devicesDir != "/var/run/gpufleet-gpu-simulator/device-plugin" || o.cdiRoot != "/var/run/cdi" {
		t.Fatalf("device-plugin: %+v, %v", o, err)
	}
	// The default mode is DRA, which needs the node name.
	if _, err := parseFlags([]string{}); err == nil || !strings.Contains(err.Error(), "--node-name") {
		t.Fatalf("default mode without a node name: err = %v", err)
	}
	t.Setenv("GPUFLEET_GPUSIM_MODE", "device-plugin")
	t.Setenv("KUBELET_SOCKET", "/var/lib/k0s/kubelet/device-plugins/kubelet.sock")
	if o, err = parseFlags([]string{}); err != nil || o.mode != "device-plugin" || o.kubeletSocket != "/var/lib/k0s/kubelet/device-plugins/kubelet.sock" {
		t.Fatalf("env: %+v, %v", o, err)
	}
	if o, err = parseFlags([]string{"--mode=dra", "--node-name=worker-1"}); err != nil || o.mode != "dra" {
		t.Fatalf("flag over env: %+v, %v", o, err)
	}
	if _, err := parseFlags([]string{"--mode=deviceplugin"}); err == nil ||
		!strings.Contains(err.Error(), `--mode="deviceplugin" is not a mode; use "dra" or "device-plugin"`) {
		t.Fatalf("unknown mode: err = %v", err)
	}
}

func TestDevicePluginRefusesToStartWithoutNVIDIACDIHook(t *testing.T) {
	dir := t.TempDir()
	o := &options{
		mode: modeDevicePlugin, cdiHookPath: filepath.Join(dir, "missing"), pollInterval: time.Second,
		kubeletSocket: filepath.Join(dir, "device-plugins", "kubelet.sock"), cdiRoot: filepath.Join(dir, "cdi"),
		devicesDir: filepath.Join(dir, "devices"), stateFile: filepath.Join(dir, "state.json"),
	}
	err := runDevicePlugin(o)
	if err == nil || !strings.Contains(err.Error(), o.cdiHookPath+" does not exist") {
		t.Fatalf("err = %v", err)
	}
	if _, statErr := os.Stat(o.cdiRoot); !os.IsNotExist(statErr) {
		t.Errorf("created %s before refusing", o.cdiRoot)
	}
}

func TestDynamicMIGWatcherAndPoolShape(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	write(t, path, stateWithMIG("Disabled"), time.Unix(1_700_000_000, 0))
	w := &watcher{path: path, dynamicMIG: true}
	changed, infos, devs, err := w.poll()
	if err != nil || !changed || len(devs) != 26 || len(infos) != 26 {
		t.Fatalf("changed=%v devices=%d infos=%d err=%v", changed, len(devs), len(infos), err)
	}
	res := partitionablePoolResources("node-a", w.result)
	slices := res.Pools["node-a"].Slices
	if len(slices) != 2 {
		t.Fatalf("slices = %d, want the counter sets' and the GPU's", len(slices))
	}
	if len(slices[0].Devices) != 0 || len(slices[0].SharedCounters) != 1 ||
		slices[0].SharedCounters[0].Name != "gpu-0-counter-set" {
		t.Fatalf("first slice = %+v", slices[0])
	}
	if len(slices[1].SharedCounters) != 0 || len(slices[1].Devices) != 26 || slices[1].Devices[0].Name != "gpu-0" {
		t.Fatalf("device slice: %d devices", len(slices[1].Devices))
	}
	for _, d := range slices[1].Devices {
		if len(d.ConsumesCounters) != 1 || d.ConsumesCounters[0].CounterSet != "gpu-0-counter-set" {
			t.Fatalf("%s consumes %v", d.Name, d.ConsumesCounters)
		}
	}

	// Off: the static devices of the same state (the one MIG device, no counters).
	w = &watcher{path: path}
	write(t, path, stateWithMIG("Enabled"), time.Unix(1_700_000_100, 0))
	if _, _, devs, err = w.poll(); err != nil || len(devs) != 1 || len(w.result.CounterSets) != 0 {
		t.Fatalf("static: %d devices, err %v", len(devs), err)
	}
}

func TestDynamicMIGFlag(t *testing.T) {
	t.Setenv("NODE_NAME", "worker-1")
	t.Setenv("GPUFLEET_GPUSIM_DYNAMIC_MIG", "")
	o, err := parseFlags([]string{})
	if err != nil || o.dynamicMIG {
		t.Fatalf("default: %v %v", o, err)
	}
	if o, err = parseFlags([]string{"--dynamic-mig"}); err != nil || !o.dynamicMIG {
		t.Fatalf("flag: %v %v", o, err)
	}
	t.Setenv("GPUFLEET_GPUSIM_DYNAMIC_MIG", "true")
	if o, err = parseFlags([]string{}); err != nil || !o.dynamicMIG {
		t.Fatalf("env: %v %v", o, err)
	}
	if o, err = parseFlags([]string{"--dynamic-mig=false"}); err != nil || o.dynamicMIG {
		t.Fatalf("flag over env: %v %v", o, err)
	}
}
