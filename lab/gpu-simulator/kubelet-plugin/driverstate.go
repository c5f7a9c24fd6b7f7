package main

// The simulated NVIDIA kernel module as the plugin sees it (driver_loaded and
// driver_version of the state file; `gpusim driver unload|load`). NVIDIA's kubelet
// plugin initializes NVML at start, which fails with "Driver Not Loaded" when the
// kernel module is not loaded, and keeps NVML (so /dev/nvidiactl) open while it
// runs, which keeps the module from being unloaded. It reads the GPUs once, at
// start: after a driver reload it must be restarted to read them again.

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// errDriverNotLoaded is NVML's answer when the kernel module is not loaded
// (nvmlInit: NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"), as NVIDIA's
// plugin reports it ("failed to initialize NVML: ...").
var errDriverNotLoaded = errors.New("failed to initialize NVML: Driver Not Loaded")

// driverChangedError is a driver release other than the one the plugin started
// with: the GPUs it published were read from another driver.
type driverChangedError struct {
	path, started, now string
}

func (e *driverChangedError) Error() string {
	return fmt.Sprintf("%s: the NVIDIA driver changed from %s to %s since the plugin started; "+
		"exiting so that the restarted plugin reads the GPUs again", e.path, e.started, e.now)
}

// checkDriver decides what a state read while running means for the plugin:
// nil (same driver, loaded), an error wrapping errDriverNotLoaded (keep the
// devices published before: only a bypassed in-use check gets here), or a
// *driverChangedError (exit, so the pod restarts and republishes). started is the
// driver release at start; "" is none known yet, and accepts any.
func checkDriver(path, started string, s *state.State) error {
	if !s.DriverLoaded() {
		return fmt.Errorf("%s: %w (driver_loaded is false)", path, errDriverNotLoaded)
	}
	if started != "" && s.DriverVersion != started {
		return &driverChangedError{path: path, started: started, now: s.DriverVersion}
	}
	return nil
}

// driverAtStart is the driver release of the state file at start, or an error
// wrapping errDriverNotLoaded when the simulated module is not loaded: the plugin
// then does not start (its pod crash-loops until `gpusim driver load`). A missing or
// unreadable state file is no reason to stop here (the watcher reports it): "".
func driverAtStart(path string) (string, error) {
	s, _, err := state.Load(path)
	if err != nil {
		return "", nil
	}
	if !s.DriverLoaded() {
		return "", fmt.Errorf("%w (GPU simulator state %s: driver_loaded is false; "+
			"load it with 'gpusim driver load')", errDriverNotLoaded, path)
	}
	return s.DriverVersion, nil
}

// holdDeviceFile opens the simulated /dev/nvidiactl beside the state file
// read-only, for the caller to keep open while it runs (as NVML keeps the real one
// open), so that `gpusim driver unload` finds the plugin among the module's
// holders. A state directory without the file (made before the simulator created
// it; `gpusim init` creates it) is logged and nothing is held: the plugin serves
// as before, only the unload is not blocked by it.
func holdDeviceFile(stateFile string) (*os.File, error) {
	path := state.DeviceFilePath(stateFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		klog.Background().Info("Warning: the simulated driver's device file does not exist; "+
			"holding none, so 'gpusim driver unload' does not see this plugin (run 'gpusim init' to create it)",
			"path", path)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the simulated driver's device file: %w", err)
	}
	return f, nil
}

// startAsDriverClient is how both modes start, as NVIDIA's plugins do: no driver
// loaded, no start (driverAtStart); then the device file held (holdDeviceFile) until
// the returned release is called. It returns the driver release started with.
func startAsDriverClient(stateFile string) (string, func(), error) {
	started, err := driverAtStart(stateFile)
	if err != nil {
		return "", nil, err
	}
	f, err := holdDeviceFile(stateFile)
	if err != nil {
		return "", nil, err
	}
	return started, func() {
		if f != nil {
			f.Close()
		}
	}, nil
}
