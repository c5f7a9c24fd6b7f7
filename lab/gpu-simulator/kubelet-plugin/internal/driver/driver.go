// Package driver implements the DRA kubelet plugin of the GPU simulator: it
// prepares and unprepares ResourceClaims for the kubelet (through
// k8s.io/dynamic-resource-allocation/kubeletplugin) by writing per-claim CDI
// specs, and keeps a checkpoint of prepared claims.
package driver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
)

// Config is where the driver keeps its files.
type Config struct {
	NodeName       string // pool name and node of the ResourceSlices
	CDIRoot        string // e.g. /var/run/cdi
	ClaimsDir      string // e.g. /var/run/gpufleet-gpu-simulator/claims
	CheckpointPath string // e.g. /var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json
	// NVIDIACDIHookPath is the node's nvidia-cdi-hook that the CDI specs call;
	// empty means DefaultNVIDIACDIHookPath.
	NVIDIACDIHookPath string
	// MIG creates and destroys the MIG devices of dynamic MIG mode; nil refuses
	// to prepare them.
	MIG MIGManager
}

// Driver implements kubeletplugin.DRAPlugin.
type Driver struct {
	cfg Config
	// fatal is called with an error the plugin cannot recover from (it stops the process).
	fatal func(error)

	mu         sync.Mutex
	devices    map[string]devices.Info // devices published now, by name
	checkpoint *Checkpoint
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// New loads the checkpoint (a missing one is empty) and returns the driver.
func New(cfg Config, fatal func(error)) (*Driver, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("node name is empty; set --node-name or NODE_NAME")
	}
	if cfg.NVIDIACDIHookPath == "" {
		cfg.NVIDIACDIHookPath = DefaultNVIDIACDIHookPath
	}
	cp, err := loadCheckpoint(cfg.CheckpointPath)
	if err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg, fatal: fatal, devices: map[string]devices.Info{}, checkpoint: cp}, nil
}

// SetDevices replaces the set of devices that claims may be prepared for.
func (d *Driver) SetDevices(infos map[string]devices.Info) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.devices = infos
}

// PreparedClaims returns the UIDs in the checkpoint, sorted.
func (d *Driver) PreparedClaims() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	uids := make([]string, 0, len(d.checkpoint.Claims))
	for uid := range d.checkpoint.Claims {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	return uids
}

// ClaimRef names the ResourceClaim a device is prepared for.
type ClaimRef struct {
	Namespace string
	Name      string
}

// PreparedDevices maps each device prepared for a claim now to that claim (a device
// shared by several claims maps to the first by claim UID).
func (d *Driver) PreparedDevices() map[string]ClaimRef {
	d.mu.Lock()
	defer d.mu.Unlock()
	uids := make([]string, 0, len(d.checkpoint.Claims))
	for uid := range d.checkpoint.Claims {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	out := map[string]ClaimRef{}
	for _, uid := range uids {
		c := d.checkpoint.Claims[uid]
		for _, dev := range c.Devices {
			if _, ok := out[dev.Device]; !ok {
				out[dev.Device] = ClaimRef{Namespace: c.Namespace, Name: c.Name}
			}
		}
	}
	return out
}

// PrepareResourceClaims creates the MIG devices of dynamic MIG devices, writes a
// CDI spec per claim and returns its CDI device IDs. A claim already in the
// checkpoint gets the same answer again (its files are rewritten, since
// /var/run/cdi does not survive a reboot).
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devs, err := d.prepareClaim(claim)
		if err != nil {
			logger.Error(err, "Prepare failed", "claim", klog.KObj(claim), "uid", claim.UID)
			result[claim.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err)}
			continue
		}
		logger.V(2).Info("Prepared claim", "claim", klog.KObj(claim), "uid", claim.UID, "devices", len(devs))
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: devs}
	}
	return result, nil
}

func (d *Driver) prepareClaim(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	uid := string(claim.UID)
	prepared, known := d.checkpoint.Claims[uid]
	if !known {
		var err error
		prepared, err = d.planClaim(claim)
		if err != nil {
			return nil, err
		}
		// Record first, so that an unprepare after a crash still finds the files to
		// remove and the MIG devices to destroy.
		d.checkpoint.Claims[uid] = prepared
		if err := d.checkpoint.save(d.cfg.CheckpointPath); err != nil {
			delete(d.checkpoint.Claims, uid)
			return nil, fmt.Errorf("save checkpoint: %w", err)
		}
	}
	prepared, err := d.createMIGDevices(uid, prepared, known)
	if err != nil {
		return nil, err
	}
	if err := writeClaimFiles(d.cfg.CDIRoot, d.cfg.ClaimsDir, d.cfg.NVIDIACDIHookPath, d.cfg.NodeName, uid, prepared); err != nil {
		return nil, err
	}
	out := make([]kubeletplugin.Device, 0, len(prepared.Devices))
	for _, pd := range prepared.Devices {
		out = append(out, kubeletplugin.Device{
			Requests:     pd.Requests,
			PoolName:     pd.Pool,
			DeviceName:   pd.Device,
			CDIDeviceIDs: pd.CDIDeviceIDs,
		})
	}
	return out, nil
}

// planClaim checks the allocation of a claim against the devices of this node and
// the claims prepared already.
func (d *Driver) planClaim(claim *resourceapi.ResourceClaim) (PreparedClaim, error) {
	uid := string(claim.UID)
	pc := PreparedClaim{Namespace: claim.Namespace, Name: claim.Name}
	if claim.Status.Allocation == nil {
		return pc, errors.New("claim is not allocated")
	}
	inUse := map[string]string{} // device -> claim UID, exclusive use only
	for otherUID, other := range d.checkpoint.Claims {
		for _, od := range other.Devices {
			if !od.AdminAccess {
				inUse[od.Device] = otherUID
			}
		}
	}
	byDevice := map[string]int{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != devices.DriverName {
			continue
		}
		if r.Pool != d.cfg.NodeName {
			return pc, fmt.Errorf("device %s is in pool %q, but this node's pool is %q", r.Device, r.Pool, d.cfg.NodeName)
		}
		info, ok := d.devices[r.Device]
		if !ok {
			return pc, fmt.Errorf("device %s is not on this node now (the simulator's MIG layout changed after allocation?)", r.Device)
		}
		if info.PrepareError != "" {
			return pc, fmt.Errorf("device %s: %s", r.Device, info.PrepareError)
		}
		admin := r.AdminAccess != nil && *r.AdminAccess
		if owner, busy := inUse[r.Device]; busy && !admin && owner != uid {
			return pc, fmt.Errorf("device %s is already prepared for claim UID %s", r.Device, owner)
		}
		if i, seen := byDevice[r.Device]; seen {
			// One device serving several requests of the claim (consumable capacity).
			pc.Devices[i].Requests = append(pc.Devices[i].Requests, r.Request)
			continue
		}
		byDevice[r.Device] = len(pc.Devices)
		pc.Devices = append(pc.Devices, PreparedDevice{
			Requests:     []string{r.Request},
			Pool:         r.Pool,
			Device:       r.Device,
			AdminAccess:  admin,
			CDIDeviceIDs: []string{CDIDeviceID(uid, r.Device)},
			Info:         info,
		})
	}
	return pc, nil
}

// UnprepareResourceClaims destroys the MIG devices created for each claim (dynamic
// MIG), removes its CDI spec and device files and drops it from the checkpoint.
// Unknown claims are not an error.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		uid := string(claim.UID)
		if prepared, ok := d.checkpoint.Claims[uid]; ok {
			if err := d.deleteMIGDevices(uid, prepared); err != nil {
				logger.Error(err, "Unprepare failed", "claim", claim.NamespacedName, "uid", uid)
				result[claim.UID] = err
				continue
			}
		}
		if err := removeClaimFiles(d.cfg.CDIRoot, d.cfg.ClaimsDir, uid); err != nil {
			result[claim.UID] = err
			continue
		}
		if _, ok := d.checkpoint.Claims[uid]; ok {
			delete(d.checkpoint.Claims, uid)
			if err := d.checkpoint.save(d.cfg.CheckpointPath); err != nil {
				result[claim.UID] = fmt.Errorf("save checkpoint: %w", err)
				continue
			}
		}
		logger.V(2).Info("Unprepared claim", "claim", claim.NamespacedName, "uid", uid)
		result[claim.UID] = nil
	}
	return result, nil
}

// HandleError logs background errors; an unrecoverable one stops the plugin.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.fatal != nil {
		d.fatal(fmt.Errorf("%s: %w", msg, err))
	}
}

// WatchHealthStatus: the simulator has no device health to report.
func (d *Driver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
