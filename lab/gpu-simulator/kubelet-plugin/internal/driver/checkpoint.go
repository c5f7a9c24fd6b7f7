package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
)

// CheckpointVersion is bumped when the checkpoint layout changes.
const CheckpointVersion = 1

// Checkpoint records every prepared claim, so that prepare is idempotent across
// plugin restarts and unprepare can undo what an earlier process did.
type Checkpoint struct {
	Version int                      `json:"version"`
	Claims  map[string]PreparedClaim `json:"claims"` // key: claim UID
}

// PreparedClaim is one prepared ResourceClaim.
type PreparedClaim struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []PreparedDevice `json:"devices"`
}

// PreparedDevice is one device of a prepared claim, with what the container sees.
type PreparedDevice struct {
	Requests     []string     `json:"requests"`
	Pool         string       `json:"pool"`
	Device       string       `json:"device"`
	AdminAccess  bool         `json:"adminAccess,omitempty"`
	CDIDeviceIDs []string     `json:"cdiDeviceIDs"`
	Info         devices.Info `json:"info"`
	// MIG is the MIG device created for a dynamic MIG device (Info.DynamicMIG);
	// nil before it is created.
	MIG *MIGDevice `json:"mig,omitempty"`
}

func newCheckpoint() *Checkpoint {
	return &Checkpoint{Version: CheckpointVersion, Claims: map[string]PreparedClaim{}}
}

// loadCheckpoint reads path; a missing file is an empty checkpoint.
func loadCheckpoint(path string) (*Checkpoint, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return newCheckpoint(), nil
	}
	if err != nil {
		return nil, err
	}
	cp := newCheckpoint()
	if err := json.Unmarshal(data, cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s is corrupt (%v); remove it only if no pod on this node uses a GPU claim", path, err)
	}
	if cp.Version != CheckpointVersion {
		return nil, fmt.Errorf("checkpoint %s has version %d; this plugin reads version %d", path, cp.Version, CheckpointVersion)
	}
	if cp.Claims == nil {
		cp.Claims = map[string]PreparedClaim{}
	}
	return cp, nil
}

func (cp *Checkpoint) save(path string) error {
	data, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(data, '\n'), 0o600)
}

// WriteFileAtomic writes a temporary file next to path and renames it over path.
// The temporary name ends in ".tmp", which CDI spec scanning ignores.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer func() { _ = os.Remove(name) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(name, path)
}
