package driver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
)

const node = "worker-1"

type env struct {
	cfg Config
	dir string
}

func newEnv(t *testing.T) env {
	dir := t.TempDir()
	return env{dir: dir, cfg: Config{
		NodeName:          node,
		CDIRoot:           filepath.Join(dir, "cdi"),
		ClaimsDir:         filepath.Join(dir, "claims"),
		CheckpointPath:    filepath.Join(dir, "plugin", "checkpoint.json"),
		NVIDIACDIHookPath: "/opt/nvidia/toolkit/nvidia-cdi-hook",
	}}
}

var nodeDevices = map[string]devices.Info{
	"gpu-0-mig-1g18gb-19-0": {
		Name: "gpu-0-mig-1g18gb-19-0", Type: devices.TypeMIG, UUID: "MIG-aaaaaaaa-0000-4000-8000-000000000000",
		ParentUUID: "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90", Profile: "1g.18gb", ProductName: "NVIDIA H200",
		PCIBusID: "0000:19:00.0", MemoryMiB: 16384,
	},
	"gpu-0-mig-1g18gb-19-1": {
		Name: "gpu-0-mig-1g18gb-19-1", Type: devices.TypeMIG, UUID: "MIG-aaaaaaaa-0000-4000-8000-000000000001",
		ParentUUID: "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90", Profile: "1g.18gb", ProductName: "NVIDIA H200",
		PCIBusID: "0000:19:00.0", MemoryMiB: 16384,
	},
}

func newDriver(t *testing.T, e env) *Driver {
	t.Helper()
	d, err := New(e.cfg, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	d.SetDevices(nodeDevices)
	return d
}

func claim(uid, name string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: results},
		}},
	}
}

func result(request, device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: devices.DriverName, Pool: node, Device: device}
}

func prepareOne(t *testing.T, d *Driver, c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	t.Helper()
	res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res[c.UID]
	if !ok || len(res) != 1 {
		t.Fatalf("result = %v, want one entry for %s", res, c.UID)
	}
	return r
}

func TestPrepareWritesCDISpecAndDeviceFile(t *testing.T) {
	e := newEnv(t)
	d := newDriver(t, e)
	uid := "0b1c2d3e-0000-4000-8000-00000000c1a1"
	other := resourceapi.DeviceRequestAllocationResult{Request: "nic", Driver: "net.example.com", Pool: node, Device: "eth1"}
	r := prepareOne(t, d, claim(uid, "mig-claim", result("mig", "gpu-0-mig-1g18gb-19-1"), other))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	wantID := "k8s.gpu.nvidia.com/claim=" + uid + "-gpu-0-mig-1g18gb-19-1"
	want := []kubeletplugin.Device{{
		Requests: []string{"mig"}, PoolName: node, DeviceName: "gpu-0-mig-1g18gb-19-1", CDIDeviceIDs: []string{wantID},
	}}
	if !reflect.DeepEqual(r.Devices, want) {
		t.Fatalf("devices = %+v, want %+v (devices of other drivers are not ours)", r.Devices, want)
	}

	specPath := filepath.Join(e.cfg.CDIRoot, "k8s.gpu.nvidia.com-claim_"+uid+".json")
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	if spec["cdiVersion"] != "0.6.0" || spec["kind"] != "k8s.gpu.nvidia.com/claim" {
		t.Fatalf("spec header = %v %v", spec["cdiVersion"], spec["kind"])
	}
	devs := spec["devices"].([]any)
	if len(devs) != 1 {
		t.Fatalf("spec devices = %v", devs)
	}
	dev := devs[0].(map[string]any)
	if dev["name"] != uid+"-gpu-0-mig-1g18gb-19-1" {
		t.Errorf("CDI device name = %v", dev["name"])
	}
	edits := dev["containerEdits"].(map[string]any)
	env := edits["env"].([]any)
	wantEnv := []any{"NVIDIA_VISIBLE_DEVICES=MIG-aaaaaaaa-0000-4000-8000-000000000001", "GPUFLEET_SIMULATED_GPU=gpu-0-mig-1g18gb-19-1"}
	if !reflect.DeepEqual(env, wantEnv) {
		t.Errorf("env = %v, want %v", env, wantEnv)
	}
	hostFile := filepath.Join(e.cfg.ClaimsDir, uid, "devices", "gpu-0-mig-1g18gb-19-1")
	var targets []string
	for _, m := range edits["mounts"].([]any) {
		mm := m.(map[string]any)
		if mm["hostPath"] != hostFile {
			t.Errorf("mount hostPath = %v, want %s", mm["hostPath"], hostFile)
		}
		targets = append(targets, mm["containerPath"].(string))
	}
	wantTargets := []string{"/run/gpufleet-gpu-simulator/devices/gpu-0-mig-1g18gb-19-1", "/run/gpufleet-gpu-simulator/device"}
	if !reflect.DeepEqual(targets, wantTargets) {
		t.Errorf("mount targets = %v, want %v", targets, wantTargets)
	}
	// The createContainer hook: the configured nvidia-cdi-hook links hooked/<device>
	// to the device file mounted under devices/.
	wantHooks := []any{map[string]any{
		"hookName": "createContainer",
		"path":     "/opt/nvidia/toolkit/nvidia-cdi-hook",
		"args": []any{"nvidia-cdi-hook", "create-symlinks", "--link",
			"/run/gpufleet-gpu-simulator/devices/gpu-0-mig-1g18gb-19-1::/run/gpufleet-gpu-simulator/hooked/gpu-0-mig-1g18gb-19-1"},
	}}
	if !reflect.DeepEqual(edits["hooks"], wantHooks) {
		t.Errorf("hooks = %#v, want %#v", edits["hooks"], wantHooks)
	}

	content, err := os.ReadFile(hostFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"device=gpu-0-mig-1g18gb-19-1", "uuid=MIG-aaaaaaaa-0000-4000-8000-000000000001",
		"profile=1g.18gb", "parentUUID=GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90",
		"claim=team-a/mig-claim", "claimUID=" + uid, "pool=" + node, "requests=mig",
	} {
		if !strings.Contains(string(content), line+"\n") {
			t.Errorf("device file lacks %q:\n%s", line, content)
		}
	}
}

func TestPrepareIsIdempotentAcrossRestarts(t *testing.T) {
	e := newEnv(t)
	uid := "11111111-0000-4000-8000-000000000001"
	c := claim(uid, "c1", result("gpu", "gpu-0-mig-1g18gb-19-0"))
	first := prepareOne(t, newDriver(t, e), c)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	// /var/run/cdi is emptied by a reboot; the checkpoint survives in the plugin dir.
	if err := os.RemoveAll(e.cfg.CDIRoot); err != nil {
		t.Fatal(err)
	}
	restarted, err := New(e.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Even with the device gone from the state, a prepared claim keeps its answer.
	restarted.SetDevices(map[string]devices.Info{})
	if got := restarted.PreparedClaims(); !reflect.DeepEqual(got, []string{uid}) {
		t.Fatalf("prepared claims after restart = %v", got)
	}
	again := prepareOne(t, restarted, c)
	if again.Err != nil || !reflect.DeepEqual(again.Devices, first.Devices) {
		t.Fatalf("second prepare = %+v, want %+v", again, first)
	}
	if _, err := os.Stat(CDISpecPath(e.cfg.CDIRoot, uid)); err != nil {
		t.Fatalf("CDI spec not rewritten: %v", err)
	}
}

func TestPrepareRefusesDeviceOfAnotherClaim(t *testing.T) {
	e := newEnv(t)
	d := newDriver(t, e)
	if r := prepareOne(t, d, claim("uid-a", "a", result("gpu", "gpu-0-mig-1g18gb-19-0"))); r.Err != nil {
		t.Fatal(r.Err)
	}
	r := prepareOne(t, d, claim("uid-b", "b", result("gpu", "gpu-0-mig-1g18gb-19-0")))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "already prepared for claim UID uid-a") {
		t.Fatalf("err = %v", r.Err)
	}
	if _, err := os.Stat(CDISpecPath(e.cfg.CDIRoot, "uid-b")); !os.IsNotExist(err) {
		t.Fatalf("a refused claim left a CDI spec: %v", err)
	}
}

func TestPrepareRefusesUnknownDeviceAndForeignPool(t *testing.T) {
	d := newDriver(t, newEnv(t))
	r := prepareOne(t, d, claim("uid-x", "x", result("gpu", "gpu-0")))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "device gpu-0 is not on this node") {
		t.Fatalf("err = %v", r.Err)
	}
	foreign := result("gpu", "gpu-0-mig-1g18gb-19-0")
	foreign.Pool = "worker-2"
	r = prepareOne(t, d, claim("uid-y", "y", foreign))
	if r.Err == nil || !strings.Contains(r.Err.Error(), `pool "worker-2"`) {
		t.Fatalf("err = %v", r.Err)
	}
	if got := d.PreparedClaims(); len(got) != 0 {
		t.Fatalf("failed prepares were checkpointed: %v", got)
	}
}

func TestUnprepareRemovesFilesAndIsIdempotent(t *testing.T) {
	e := newEnv(t)
	d := newDriver(t, e)
	uid := "22222222-0000-4000-8000-000000000002"
	if r := prepareOne(t, d, claim(uid, "c2", result("gpu", "gpu-0-mig-1g18gb-19-1"))); r.Err != nil {
		t.Fatal(r.Err)
	}
	obj := kubeletplugin.NamespacedObject{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "c2"}, UID: types.UID(uid)}
	for i := 0; i < 2; i++ {
		res, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{obj})
		if err != nil || len(res) != 1 || res[types.UID(uid)] != nil {
			t.Fatalf("unprepare #%d = %v, %v", i+1, res, err)
		}
	}
	if _, err := os.Stat(CDISpecPath(e.cfg.CDIRoot, uid)); !os.IsNotExist(err) {
		t.Errorf("CDI spec still there: %v", err)
	}
	if _, err := os.Stat(ClaimDir(e.cfg.ClaimsDir, uid)); !os.IsNotExist(err) {
		t.Errorf("claim dir still there: %v", err)
	}
	cp, err := loadCheckpoint(e.cfg.CheckpointPath)
	if err != nil || len(cp.Claims) != 0 {
		t.Fatalf("checkpoint = %+v, %v", cp, err)
	}
	// The device is free again for another claim.
	if r := prepareOne(t, d, claim("uid-next", "next", result("gpu", "gpu-0-mig-1g18gb-19-1"))); r.Err != nil {
		t.Fatal(r.Err)
	}
}

func TestCorruptCheckpointIsAnError(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Dir(e.cfg.CheckpointPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.cfg.CheckpointPath, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(e.cfg, nil); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("err = %v", err)
	}
}

func TestPrepareRefusesDynamicMIGDeviceWithoutDynamicMIG(t *testing.T) {
	e := newEnv(t)
	d := newDriver(t, e) // Config.MIG nil: the plugin runs without --dynamic-mig
	infos := map[string]devices.Info{}
	for k, v := range nodeDevices {
		infos[k] = v
	}
	infos["gpu-0-mig-3g71gb-9-4"] = devices.Info{
		Name: "gpu-0-mig-3g71gb-9-4", Type: devices.TypeMIG, Profile: "3g.71gb",
		ParentUUID: "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90", PCIBusID: "0000:19:00.0",
		DynamicMIG: &devices.DynamicMIG{GIProfileID: 9, PlacementStart: 4, PlacementSize: 4},
	}
	d.SetDevices(infos)
	uid := "0b1c2d3e-0000-4000-8000-00000000d001"
	r := prepareOne(t, d, claim(uid, "dyn", result("mig", "gpu-0-mig-3g71gb-9-4")))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "runs without dynamic MIG") ||
		!strings.Contains(r.Err.Error(), "gpu-0-mig-3g71gb-9-4") {
		t.Fatalf("err = %v", r.Err)
	}
	if got := d.PreparedClaims(); len(got) != 0 {
		t.Fatalf("prepared claims = %v", got)
	}
	entries, _ := os.ReadDir(e.cfg.CDIRoot)
	if len(entries) != 0 {
		t.Fatalf("CDI specs written: %v", entries)
	}
}
