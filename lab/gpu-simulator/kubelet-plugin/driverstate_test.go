package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// withDriver is oneGPU (MIG disabled) at driver release version, loaded or not.
func withDriver(version string, loaded bool) string {
	s := strings.Replace(stateWithMIG("Disabled"), `"580.159.04"`, `"`+version+`"`, 1)
	if !loaded {
		s = strings.Replace(s, `"gpus": [`, `"driver_loaded": false, "gpus": [`, 1)
	}
	return s
}

func TestRunRefusesToStartWhileTheDriverIsUnloaded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	write(t, path, withDriver("580.159.04", false), time.Now())
	o := startOptions(t, path)
	err := run(o)
	if !errors.Is(err, errDriverNotLoaded) || !strings.Contains(err.Error(), "failed to initialize NVML: Driver Not Loaded") ||
		!strings.Contains(err.Error(), path) {
		t.Fatalf("run: err = %v; want NVML's Driver Not Loaded naming %s", err, path)
	}
	if _, statErr := os.Stat(o.pluginDataDir); !os.IsNotExist(statErr) {
		t.Errorf("run created %s before refusing", o.pluginDataDir)
	}
	// The device-plugin mode refuses alike.
	if err := runDevicePlugin(o); !errors.Is(err, errDriverNotLoaded) {
		t.Errorf("runDevicePlugin: err = %v; want Driver Not Loaded", err)
	}
	// Loaded again (a state without the field is loaded): this check passes, and run
	// fails later, at the missing kubeconfig.
	write(t, path, stateWithMIG("Disabled"), time.Now().Add(time.Second))
	if err := run(o); err == nil || errors.Is(err, errDriverNotLoaded) {
		t.Errorf("run with the driver loaded: err = %v; want the kubeconfig error", err)
	}
}

func TestCheckDriverDecides(t *testing.T) {
	parse := func(content string) *state.State {
		s, err := state.Parse([]byte(content))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := checkDriver("s.json", "580.159.04", parse(withDriver("580.159.04", true))); err != nil {
		t.Errorf("same release, loaded: %v; want nil (keep serving)", err)
	}
	if err := checkDriver("s.json", "", parse(withDriver("580.95.05", true))); err != nil {
		t.Errorf("no release known yet: %v; want nil", err)
	}
	// Unloaded wins over a release change: nothing is read from an unloaded driver.
	err := checkDriver("s.json", "580.159.04", parse(withDriver("580.95.05", false)))
	if !errors.Is(err, errDriverNotLoaded) {
		t.Errorf("unloaded: %v; want Driver Not Loaded (keep the devices)", err)
	}
	err = checkDriver("s.json", "580.159.04", parse(withDriver("580.95.05", true)))
	var changed *driverChangedError
	if !errors.As(err, &changed) || changed.started != "580.159.04" || changed.now != "580.95.05" {
		t.Fatalf("new release: %v; want a driverChangedError (exit)", err)
	}
	if !strings.Contains(err.Error(), "changed from 580.159.04 to 580.95.05") {
		t.Errorf("message %q does not name both releases", err)
	}
}

func TestWatcherKeepsDevicesWhileUnloadedAndStopsOnANewRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	t0 := time.Unix(1_700_000_000, 0)
	write(t, path, withDriver("580.159.04", true), t0)
	w := &watcher{path: path, driverVersion: "580.159.04"}
	if changed, _, devs, err := w.poll(); err != nil || !changed || len(devs) != 1 {
		t.Fatalf("first read: changed=%v devs=%d err=%v", changed, len(devs), err)
	}
	write(t, path, withDriver("580.159.04", false), t0.Add(time.Second))
	if changed, _, _, err := w.poll(); changed || !errors.Is(err, errDriverNotLoaded) {
		t.Fatalf("unloaded: changed=%v err=%v; want no change and Driver Not Loaded", changed, err)
	}
	if changed, _, _, err := w.poll(); changed || err != nil {
		t.Fatalf("unloaded, polled again: changed=%v err=%v; want it reported once", changed, err)
	}
	write(t, path, withDriver("580.95.05", true), t0.Add(2*time.Second))
	var driverChanged *driverChangedError
	if changed, _, _, err := w.poll(); changed || !errors.As(err, &driverChanged) {
		t.Fatalf("reloaded at a new release: changed=%v err=%v; want a driverChangedError", changed, err)
	}
	// Started before the state file existed: the first loaded release is the one.
	w = &watcher{path: path}
	if _, _, _, err := w.poll(); err != nil || w.driverVersion != "580.95.05" {
		t.Fatalf("first read without a release: err=%v driverVersion=%q", err, w.driverVersion)
	}
}

func TestHoldDeviceFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	// A state directory from before the device file existed: nothing held, no error.
	if f, err := holdDeviceFile(path); f != nil || err != nil {
		t.Fatalf("no device file: f=%v err=%v; want nothing held", f, err)
	}
	device := state.DeviceFilePath(path)
	if err := os.MkdirAll(filepath.Dir(device), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(device, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := holdDeviceFile(path)
	if err != nil || f == nil {
		t.Fatalf("device file: f=%v err=%v", f, err)
	}
	defer f.Close()
	// Open, read-only, on that file (same inode: what gpusim's /proc scan compares).
	held, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.Stat(device)
	if err != nil || !os.SameFile(held, onDisk) {
		t.Fatalf("held file is not %s (err %v)", device, err)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Error("the device file is held writable; want read-only")
	}
}
