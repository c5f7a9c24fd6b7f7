// Package state reads the GPU simulator's state file (schema 1).
//
// The state file is written atomically by the simulated `nvidia-smi`
// (gpufleet/lab/gpusim/) and only read here. Its schema is documented in
// lab/gpu-simulator/README.md; field names and units (MiB, memory slices)
// follow that document.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// SchemaVersion is the only schema this reader understands.
const SchemaVersion = 1

// DefaultPath is where the simulator writes its state on a lab node.
const DefaultPath = "/var/lib/gpufleet-gpu-simulator/state.json"

// DeviceFile is the simulator's stand-in for /dev/nvidiactl, relative to the state
// file's directory (gpufleet/lab/gpusim/state.py device_file_path). A process that
// holds it open keeps the simulated kernel module in use: `gpusim driver unload` is
// refused, as rmmod of the real nvidia module is while a process holds /dev/nvidia*.
const DeviceFile = "dev/nvidiactl"

// DeviceFilePath is <directory of stateFile>/dev/nvidiactl.
func DeviceFilePath(stateFile string) string {
	return filepath.Join(filepath.Dir(stateFile), filepath.FromSlash(DeviceFile))
}

// MIG mode values of mig_mode_current / mig_mode_pending.
const (
	MIGEnabled  = "Enabled"
	MIGDisabled = "Disabled"
	MIGNotAvail = "N/A"
)

// State is the whole file.
type State struct {
	Schema        int    `json:"schema"`
	Simulator     string `json:"simulator"`
	DriverVersion string `json:"driver_version"` // e.g. "580.159.04"
	CUDAVersion   string `json:"cuda_version"`   // e.g. "13.0"
	// DriverLoadedField is whether the simulated kernel module is loaded (`gpusim
	// driver load|unload`); absent (files written before the field) is loaded. Read it
	// through DriverLoaded.
	DriverLoadedField *bool `json:"driver_loaded,omitempty"`
	GPUs              []GPU `json:"gpus"`
}

// DriverLoaded reports whether the simulated kernel module is loaded.
func (s *State) DriverLoaded() bool { return s.DriverLoadedField == nil || *s.DriverLoadedField }

// GPU is one simulated card.
type GPU struct {
	Index             int           `json:"index"`
	Minor             int           `json:"minor"`
	UUID              string        `json:"uuid"`
	Serial            string        `json:"serial"`
	Name              string        `json:"name"`
	Brand             string        `json:"brand"`
	Architecture      string        `json:"architecture"`
	ComputeCapability string        `json:"compute_capability"`        // "9.0"
	PCIBusID          string        `json:"pci_bus_id"`                // "00000000:19:00.0"
	PCIeRoot          string        `json:"pcie_root,omitempty"`       // "pci0000:00"; "" = not resolved
	AddressingMode    string        `json:"addressing_mode,omitempty"` // "None", "HMM", "ATS"; "" = not reported
	MemoryMiB         int64         `json:"memory_mib"`
	MIGCapable        bool          `json:"mig_capable"`
	MIGModeCurrent    string        `json:"mig_mode_current"`
	MIGModePending    string        `json:"mig_mode_pending"`
	GPUInstances      []GPUInstance `json:"gpu_instances"`
	Processes         []Process     `json:"processes"`
	// UtilizationPercent is the simulated GPU utilization (0-100) the simulator's
	// DCGM-named metrics report; absent is 0.
	UtilizationPercent int `json:"utilization_percent,omitempty"`
}

// Addressing modes NVML reports (nvmlDeviceAddressingModeType_t, as go-nvlib
// names them); the empty string is a GPU or platform that reports none.
var addressingModes = map[string]bool{"": true, "None": true, "HMM": true, "ATS": true}

// pcieRootRe is a PCIe root complex as sysfs names it: pci<domain>:<bus>.
var pcieRootRe = regexp.MustCompile(`^pci[0-9a-f]{4}:[0-9a-f]{2}$`)

// MIGEnabled reports whether the current (not the pending) MIG mode is enabled.
func (g GPU) MIGEnabled() bool { return g.MIGModeCurrent == MIGEnabled }

// GPUInstance is one MIG GPU instance (GI). Placement is in memory slices.
type GPUInstance struct {
	ID               int               `json:"id"`
	Profile          string            `json:"profile"`    // "1g.18gb"
	ProfileID        int               `json:"profile_id"` // 19
	PlacementStart   int               `json:"placement_start"`
	PlacementSize    int               `json:"placement_size"`
	MemoryMiB        int64             `json:"memory_mib"`
	Multiprocessors  int64             `json:"multiprocessors"`
	CopyEngines      int64             `json:"copy_engines"`
	Decoders         int64             `json:"decoders"`
	Encoders         int64             `json:"encoders"`
	JPEGEngines      int64             `json:"jpeg_engines"`
	OFAEngines       int64             `json:"ofa_engines"`
	ComputeInstances []ComputeInstance `json:"compute_instances"`
}

// ComputeInstance is one compute instance (CI) inside a GPU instance; each CI is
// one MIG device with its own MIG-... UUID.
type ComputeInstance struct {
	ID              int    `json:"id"`
	Profile         string `json:"profile"`    // "1g.18gb" or "1c.3g.71gb"
	ProfileID       int    `json:"profile_id"` // CI profile ID
	Multiprocessors int64  `json:"multiprocessors"`
	UUID            string `json:"uuid"`
}

// Process is a process holding a GPU.
type Process struct {
	PID           int    `json:"pid"`
	Name          string `json:"name"`
	UsedMemoryMiB int64  `json:"used_memory_mib"`
}

// Parse decodes and validates a state document. Errors name the field, the
// value and what is expected.
func Parse(data []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("state file is not valid JSON: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Load reads and parses the state file at path.
func Load(path string) (*State, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	s, err := Parse(data)
	if err != nil {
		return nil, data, fmt.Errorf("%s: %w", path, err)
	}
	return s, data, nil
}

// Validate checks the fields the kubelet plugin relies on.
func (s *State) Validate() error {
	var errs []error
	if s.Schema != SchemaVersion {
		errs = append(errs, fmt.Errorf("schema=%d is not supported; this plugin reads schema %d", s.Schema, SchemaVersion))
	}
	if s.DriverVersion == "" {
		errs = append(errs, errors.New(`driver_version is empty; expected e.g. "580.159.04"`))
	}
	if s.CUDAVersion == "" {
		errs = append(errs, errors.New(`cuda_version is empty; expected e.g. "13.0"`))
	}
	minors := map[int]bool{}
	for i, g := range s.GPUs {
		where := fmt.Sprintf("gpus[%d]", i)
		if g.UUID == "" || !strings.HasPrefix(g.UUID, "GPU-") {
			errs = append(errs, fmt.Errorf("%s.uuid=%q must start with \"GPU-\"", where, g.UUID))
		}
		if minors[g.Minor] {
			errs = append(errs, fmt.Errorf("%s.minor=%d is used by another GPU; minors must be unique", where, g.Minor))
		}
		minors[g.Minor] = true
		if g.UtilizationPercent < 0 || g.UtilizationPercent > 100 {
			errs = append(errs, fmt.Errorf("%s.utilization_percent=%d must be 0..100 or absent", where, g.UtilizationPercent))
		}
		if !addressingModes[g.AddressingMode] {
			errs = append(errs, fmt.Errorf("%s.addressing_mode=%q must be one of None, HMM, ATS or absent", where, g.AddressingMode))
		}
		if g.PCIeRoot != "" && !pcieRootRe.MatchString(g.PCIeRoot) {
			errs = append(errs, fmt.Errorf("%s.pcie_root=%q must be a root complex like \"pci0000:00\" (lower-case hex) or absent", where, g.PCIeRoot))
		}
		if g.MemoryMiB <= 0 {
			errs = append(errs, fmt.Errorf("%s.memory_mib=%d must be positive (MiB)", where, g.MemoryMiB))
		}
		switch g.MIGModeCurrent {
		case MIGEnabled, MIGDisabled, MIGNotAvail:
		default:
			errs = append(errs, fmt.Errorf("%s.mig_mode_current=%q must be one of Enabled, Disabled, N/A", where, g.MIGModeCurrent))
		}
		for j, gi := range g.GPUInstances {
			giWhere := fmt.Sprintf("%s.gpu_instances[%d]", where, j)
			if gi.Profile == "" {
				errs = append(errs, fmt.Errorf("%s.profile is empty; expected e.g. \"1g.18gb\"", giWhere))
			}
			if gi.PlacementSize < 1 || gi.PlacementStart < 0 {
				errs = append(errs, fmt.Errorf("%s placement %d:%d is invalid; start must be >= 0 and size >= 1 (memory slices)", giWhere, gi.PlacementStart, gi.PlacementSize))
			}
			for k, ci := range gi.ComputeInstances {
				if !strings.HasPrefix(ci.UUID, "MIG-") {
					errs = append(errs, fmt.Errorf("%s.compute_instances[%d].uuid=%q must start with \"MIG-\"", giWhere, k, ci.UUID))
				}
			}
		}
	}
	return errors.Join(errs...)
}
