package driver

// Dynamic MIG prepare and unprepare, as NVIDIA's DRA kubelet plugin does them with
// its DynamicMIG feature gate (kubernetes-sigs/dra-driver-nvidia-gpu at
// 95932046683719c43b6a0dd9613c2e5aad5d6703, cmd/gpu-kubelet-plugin/nvlib.go
// createMigDevice, deleteMigDevice, maybeDisableMigMode; device_state.go
// prepareDevices, unprepareDevices):
//
//   - prepare: enable MIG mode when it is off (NVML SetMigMode), create the GPU
//     instance at the allocated profile and placement
//     (CreateGpuInstanceWithPlacement; an occupied placement is refused), then its
//     full-size compute instance; the MIG device's UUID is that of the CI;
//   - unprepare: destroy the compute instance, then the GPU instance; a GPU instance
//     that is gone already is success; when the GPU holds no GPU instance any more
//     and can toggle MIG mode without a reset (Hopper and later), disable MIG mode.
//
// The GPU is the simulator's: the plugin asks the simulator's nvidia-smi
// (nvidia-smi -mig, mig -cgi <GI profile ID>:<start> -C, -dci, -dgi), which owns the
// state file and its MIG rules (placements, overlaps, instance limits, MIG mode,
// GPU in use), and reads the state file back for the IDs and the UUID.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// MIGDevice is a MIG device created for a claim (NVIDIA's MigLiveTuple): its GPU
// instance ID, compute instance ID and UUID (MIG-...).
type MIGDevice struct {
	GIID int    `json:"giID"`
	CIID int    `json:"ciID"`
	UUID string `json:"uuid"`
}

// MIGManager creates and destroys the MIG devices of dynamic MIG mode on the GPU
// whose UUID is parentUUID.
type MIGManager interface {
	// Create makes the GPU instance of spec (profile and placement) and its
	// full-size compute instance. It fails when the GPU refuses (placement
	// occupied, MIG mode not enabled, ...).
	Create(parentUUID string, spec devices.DynamicMIG) (MIGDevice, error)
	// Find returns the MIG device at spec's profile and placement; ok is false
	// when there is no such GPU instance.
	Find(parentUUID string, spec devices.DynamicMIG) (dev MIGDevice, ok bool, err error)
	// Delete destroys the compute instances and the GPU instance at spec's profile
	// and placement (dev.GIID when known); a GPU instance that does not exist is
	// success. It disables MIG mode when the GPU then holds no GPU instance.
	Delete(parentUUID string, spec devices.DynamicMIG, dev *MIGDevice) error
}

// DefaultNVIDIASMI is where the simulator installs its nvidia-smi on a node.
const DefaultNVIDIASMI = "/usr/bin/nvidia-smi"

// SimulatorMIG is the MIGManager of the GPU simulator: it runs the simulator's
// nvidia-smi and reads the state file.
type SimulatorMIG struct {
	// StatePath is the state file; nvidia-smi gets it as GPUFLEET_GPUSIM_STATE
	// (the same path inside Root and outside).
	StatePath string
	// Root is the node's root filesystem as the plugin sees it (NVIDIA's driver
	// root, /driver-root in the pod); nvidia-smi runs chrooted there. "" or "/":
	// no chroot.
	Root string
	// NVIDIASMI is the simulator's nvidia-smi inside Root ("" = DefaultNVIDIASMI).
	NVIDIASMI string
	// Run runs one nvidia-smi command line and returns its output; nil runs it.
	Run func(args ...string) (string, error)
}

var _ MIGManager = (*SimulatorMIG)(nil)

func (m *SimulatorMIG) run(args ...string) (string, error) {
	if m.Run != nil {
		return m.Run(args...)
	}
	smi := m.NVIDIASMI
	if smi == "" {
		smi = DefaultNVIDIASMI
	}
	cmd := exec.Command(smi, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GPUFLEET_GPUSIM_STATE=" + m.StatePath}
	if m.Root != "" && m.Root != "/" {
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: m.Root}
		cmd.Dir = "/"
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("nvidia-smi %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (m *SimulatorMIG) gpu(parentUUID string) (state.GPU, error) {
	s, _, err := state.Load(m.StatePath)
	if err != nil {
		return state.GPU{}, err
	}
	for _, g := range s.GPUs {
		if strings.EqualFold(g.UUID, parentUUID) {
			return g, nil
		}
	}
	return state.GPU{}, fmt.Errorf("GPU %s is not in the simulator's state file %s", parentUUID, m.StatePath)
}

// instanceAt is the GPU instance of spec's profile at spec's placement.
func instanceAt(g state.GPU, spec devices.DynamicMIG) (state.GPUInstance, bool) {
	for _, gi := range g.GPUInstances {
		if gi.ProfileID == spec.GIProfileID && gi.PlacementStart == spec.PlacementStart {
			return gi, true
		}
	}
	return state.GPUInstance{}, false
}

// migDevice is the MIG device of gi: its compute instance spanning the whole GPU
// instance (the only kind NVIDIA's driver creates).
func migDevice(gi state.GPUInstance) (MIGDevice, error) {
	for _, ci := range gi.ComputeInstances {
		if ci.Multiprocessors == gi.Multiprocessors {
			return MIGDevice{GIID: gi.ID, CIID: ci.ID, UUID: ci.UUID}, nil
		}
	}
	return MIGDevice{}, fmt.Errorf("GPU instance %d (%s at %d) has no full-size compute instance", gi.ID, gi.Profile, gi.PlacementStart)
}

// Find implements MIGManager.
func (m *SimulatorMIG) Find(parentUUID string, spec devices.DynamicMIG) (MIGDevice, bool, error) {
	g, err := m.gpu(parentUUID)
	if err != nil {
		return MIGDevice{}, false, err
	}
	gi, ok := instanceAt(g, spec)
	if !ok {
		return MIGDevice{}, false, nil
	}
	dev, err := migDevice(gi)
	return dev, err == nil, err
}

// Create implements MIGManager.
func (m *SimulatorMIG) Create(parentUUID string, spec devices.DynamicMIG) (MIGDevice, error) {
	g, err := m.gpu(parentUUID)
	if err != nil {
		return MIGDevice{}, err
	}
	if !g.MIGEnabled() {
		out, err := m.run("-i", parentUUID, "-mig", "1")
		if err != nil {
			return MIGDevice{}, fmt.Errorf("enable MIG mode: %w", err)
		}
		if g, err = m.gpu(parentUUID); err != nil {
			return MIGDevice{}, err
		}
		if !g.MIGEnabled() {
			return MIGDevice{}, fmt.Errorf("enable MIG mode of GPU %s: MIG mode is %s (pending %s): %s",
				parentUUID, g.MIGModeCurrent, g.MIGModePending, strings.TrimSpace(out))
		}
	}
	tuple := strconv.Itoa(spec.GIProfileID) + ":" + strconv.Itoa(spec.PlacementStart)
	if _, err := m.run("mig", "-i", parentUUID, "-cgi", tuple, "-C"); err != nil {
		return MIGDevice{}, fmt.Errorf("create GPU instance %s: %w", tuple, err)
	}
	dev, ok, err := m.Find(parentUUID, spec)
	if err != nil {
		return MIGDevice{}, err
	}
	if !ok {
		return MIGDevice{}, fmt.Errorf("nvidia-smi created GPU instance %s, but the state file has none there", tuple)
	}
	return dev, nil
}

// Delete implements MIGManager.
func (m *SimulatorMIG) Delete(parentUUID string, spec devices.DynamicMIG, dev *MIGDevice) error {
	g, err := m.gpu(parentUUID)
	if err != nil {
		return err
	}
	gi, ok := instanceAt(g, spec)
	if ok && dev != nil && gi.ID != dev.GIID {
		return fmt.Errorf("the GPU instance at placement %d is ID %d, not the prepared ID %d; left alone",
			spec.PlacementStart, gi.ID, dev.GIID)
	}
	if ok {
		giID := strconv.Itoa(gi.ID)
		for _, ci := range gi.ComputeInstances {
			if _, err := m.run("mig", "-i", parentUUID, "-gi", giID, "-ci", strconv.Itoa(ci.ID), "-dci"); err != nil {
				return fmt.Errorf("destroy compute instance: %w", err)
			}
		}
		if _, err := m.run("mig", "-i", parentUUID, "-gi", giID, "-dgi"); err != nil {
			return fmt.Errorf("destroy GPU instance: %w", err)
		}
		if g, err = m.gpu(parentUUID); err != nil {
			return err
		}
	}
	return m.maybeDisableMIGMode(g)
}

// maybeDisableMIGMode disables MIG mode of a GPU without GPU instances that can
// toggle it without a reset (NVIDIA's maybeDisableMigMode).
func (m *SimulatorMIG) maybeDisableMIGMode(g state.GPU) error {
	if len(g.GPUInstances) > 0 || !g.MIGEnabled() || !devices.MIGModeToggles(g.Architecture) {
		return nil
	}
	if _, err := m.run("-i", g.UUID, "-mig", "0"); err != nil {
		return fmt.Errorf("disable MIG mode: %w", err)
	}
	return nil
}

// CheckNVIDIASMI refuses a root without the simulator's nvidia-smi, so that the
// plugin says at start what dynamic MIG prepare would lack.
func CheckNVIDIASMI(root, smi string) error {
	if smi == "" {
		smi = DefaultNVIDIASMI
	}
	path := smi
	if root != "" && root != "/" {
		path = strings.TrimSuffix(root, "/") + smi
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("nvidia-smi %s does not exist; dynamic MIG prepare runs it to create MIG devices "+
			"(set --driver-root, chart value nvidiaDriverRoot, to the node's root)", path)
	}
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("nvidia-smi %s is not executable", path)
	}
	return nil
}

// sharedMIG is the MIG device that another prepared claim holds for device (a
// device shared with admin access), or nil.
func (d *Driver) sharedMIG(uid, device string) *MIGDevice {
	for otherUID, other := range d.checkpoint.Claims {
		if otherUID == uid {
			continue
		}
		for _, od := range other.Devices {
			if od.Device == device && od.MIG != nil {
				return od.MIG
			}
		}
	}
	return nil
}

// createMIGDevices creates the MIG device of each dynamic MIG device of the claim
// that has none yet and records it in the checkpoint. A retry (retry true: the
// claim was in the checkpoint) first takes the MIG device at the allocated
// placement if an earlier attempt made it. On failure the MIG devices created by
// this call are destroyed again and a claim that was not known before is dropped
// from the checkpoint, so that a refused prepare leaves nothing behind.
func (d *Driver) createMIGDevices(uid string, pc PreparedClaim, retry bool) (PreparedClaim, error) {
	var created []int
	var err error
	for i := range pc.Devices {
		pd := &pc.Devices[i]
		if pd.Info.DynamicMIG == nil || pd.MIG != nil {
			continue
		}
		var isNew bool
		if isNew, err = d.createMIGDevice(uid, pd, retry); err != nil {
			err = fmt.Errorf("device %s: %w", pd.Device, err)
			break
		}
		if isNew {
			created = append(created, i)
		}
		d.checkpoint.Claims[uid] = pc
		if err = d.checkpoint.save(d.cfg.CheckpointPath); err != nil {
			err = fmt.Errorf("save checkpoint: %w", err)
			break
		}
	}
	if err == nil {
		return pc, nil
	}
	rolledBack := true
	for _, i := range created {
		pd := &pc.Devices[i]
		if derr := d.cfg.MIG.Delete(pd.Info.ParentUUID, *pd.Info.DynamicMIG, pd.MIG); derr != nil {
			rolledBack = false
			err = fmt.Errorf("%w; destroying MIG device %s again failed: %v", err, pd.Device, derr)
			continue
		}
		pd.MIG, pd.Info.UUID = nil, ""
	}
	if rolledBack && !retry {
		delete(d.checkpoint.Claims, uid)
	} else {
		d.checkpoint.Claims[uid] = pc
	}
	if serr := d.checkpoint.save(d.cfg.CheckpointPath); serr != nil {
		err = fmt.Errorf("%w; save checkpoint: %v", err, serr)
	}
	return pc, err
}

// createMIGDevice gives pd its MIG device: the one another claim shares, on a
// retry the one at its placement, else a new one (isNew true).
func (d *Driver) createMIGDevice(uid string, pd *PreparedDevice, retry bool) (isNew bool, err error) {
	if d.cfg.MIG == nil {
		return false, errors.New("a dynamic MIG device, but this plugin runs without dynamic MIG (--dynamic-mig)")
	}
	spec := *pd.Info.DynamicMIG
	if shared := d.sharedMIG(uid, pd.Device); shared != nil {
		dev := *shared
		pd.MIG, pd.Info.UUID = &dev, dev.UUID
		return false, nil
	}
	if retry {
		dev, ok, err := d.cfg.MIG.Find(pd.Info.ParentUUID, spec)
		if err != nil {
			return false, err
		}
		if ok {
			pd.MIG, pd.Info.UUID = &dev, dev.UUID
			return false, nil
		}
	}
	dev, err := d.cfg.MIG.Create(pd.Info.ParentUUID, spec)
	if err != nil {
		return false, err
	}
	pd.MIG, pd.Info.UUID = &dev, dev.UUID
	return true, nil
}

// deleteMIGDevices destroys the MIG devices of a prepared claim that no other
// prepared claim shares (a device with admin access), as NVIDIA's unprepare does.
// A MIG device that is gone already is success, so unprepare can be repeated.
func (d *Driver) deleteMIGDevices(uid string, pc PreparedClaim) error {
	for _, pd := range pc.Devices {
		if pd.Info.DynamicMIG == nil || d.sharedMIG(uid, pd.Device) != nil {
			continue
		}
		if d.cfg.MIG == nil {
			return fmt.Errorf("device %s is a dynamic MIG device, but this plugin runs without dynamic MIG (--dynamic-mig)", pd.Device)
		}
		if err := d.cfg.MIG.Delete(pd.Info.ParentUUID, *pd.Info.DynamicMIG, pd.MIG); err != nil {
			return fmt.Errorf("delete MIG device %s: %w", pd.Device, err)
		}
	}
	return nil
}
