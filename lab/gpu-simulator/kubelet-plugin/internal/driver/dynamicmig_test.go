package driver

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// The tests here run the GPU simulator's own nvidia-smi (gpufleet/lab/gpusim of this
// repository, under python3), so that the MIG rules checked are the simulator's.

// simGPU is a simulated H200 in dynamic MIG mode: its state file, the simulator's
// nvidia-smi, and the devices the plugin publishes for it.
type simGPU struct {
	mig    *SimulatorMIG
	python string
	env    []string // PYTHONPATH and GPUFLEET_GPUSIM_STATE for the simulator
}

func newSimGPU(t *testing.T) simGPU {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the GPU simulator's nvidia-smi cannot run")
	}
	repo, err := filepath.Abs(filepath.Join("..", "..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, "gpufleet", "lab", "gpusim", "cli.py")); err != nil {
		t.Skipf("the GPU simulator is not at %s: %v", repo, err)
	}
	dir := t.TempDir()
	// The simulator imports the collection's MIG tables under their collection path.
	lib := filepath.Join(dir, "lib")
	if err := os.MkdirAll(filepath.Join(lib, "ansible_collections", "gpufleet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo, filepath.Join(lib, "ansible_collections", "gpufleet", "cluster")); err != nil {
		t.Fatal(err)
	}
	pythonPath := repo + string(os.PathListSeparator) + lib
	smi := filepath.Join(dir, "nvidia-smi")
	script := "#!/bin/sh\nPYTHONPATH='" + pythonPath + "' exec '" + python + "' -m gpufleet.lab.gpusim \"$@\"\n"
	if err := os.WriteFile(smi, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	statePath := filepath.Join(dir, "state.json")
	g := simGPU{
		mig:    &SimulatorMIG{StatePath: statePath, NVIDIASMI: smi},
		python: python,
		env:    []string{"PYTHONPATH=" + pythonPath, "GPUFLEET_GPUSIM_STATE=" + statePath},
	}
	g.admin(t, "init", "--model", "NVIDIA H200", "--node-name", node)
	return g
}

// admin runs the simulator's administration entry (gpusim ...).
func (g simGPU) admin(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(g.python, append([]string{"-m", "gpufleet.lab.gpusim", "admin"}, args...)...)
	cmd.Env = append(os.Environ(), g.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gpusim %v: %v\n%s", args, err, out)
	}
}

func (g simGPU) state(t *testing.T) state.GPU {
	t.Helper()
	s, _, err := state.Load(g.mig.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	return s.GPUs[0]
}

// driver is a plugin with --dynamic-mig over g, its devices built from g's state.
func (g simGPU) driver(t *testing.T, e env) *Driver {
	t.Helper()
	e.cfg.MIG = g.mig
	d, err := New(e.cfg, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := state.Load(g.mig.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := devices.BuildDynamic(s)
	if err != nil {
		t.Fatal(err)
	}
	d.SetDevices(res.Infos)
	return d
}

func unprepareOne(t *testing.T, d *Driver, uid string) error {
	t.Helper()
	res, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: types.UID(uid)}})
	if err != nil {
		t.Fatal(err)
	}
	return res[types.UID(uid)]
}

func giPlacements(g state.GPU) []string {
	var out []string
	for _, gi := range g.GPUInstances {
		out = append(out, gi.Profile+"@"+strconv.Itoa(gi.PlacementStart))
	}
	return out
}

func TestDynamicMIGPrepareCreatesInstanceAtAllocatedPlacement(t *testing.T) {
	g := newSimGPU(t)
	e := newEnv(t)
	d := g.driver(t, e)
	uid := "d1000000-0000-4000-8000-000000000001"
	r := prepareOne(t, d, claim(uid, "big", result("mig", "gpu-0-mig-3g71gb-9-4")))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	gpu := g.state(t)
	if gpu.MIGModeCurrent != state.MIGEnabled {
		t.Errorf("MIG mode %s, want Enabled (prepare enables it as NVIDIA's driver does)", gpu.MIGModeCurrent)
	}
	if len(gpu.GPUInstances) != 1 {
		t.Fatalf("GPU instances %v, want one 3g.71gb at 4", giPlacements(gpu))
	}
	gi := gpu.GPUInstances[0]
	if gi.ProfileID != 9 || gi.PlacementStart != 4 || gi.PlacementSize != 4 || len(gi.ComputeInstances) != 1 {
		t.Fatalf("GPU instance %+v, want profile 9 at 4:4 with one compute instance", gi)
	}
	ci := gi.ComputeInstances[0]
	if ci.Profile != "3g.71gb" || !strings.HasPrefix(ci.UUID, "MIG-") {
		t.Fatalf("compute instance %+v, want the full-size 3g.71gb", ci)
	}
	raw, err := os.ReadFile(CDISpecPath(e.cfg.CDIRoot, uid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"NVIDIA_VISIBLE_DEVICES=`+ci.UUID+`"`) {
		t.Errorf("CDI spec does not inject the MIG device's UUID %s:\n%s", ci.UUID, raw)
	}
	content, err := os.ReadFile(DeviceFilePath(e.cfg.ClaimsDir, uid, "gpu-0-mig-3g71gb-9-4"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"uuid=" + ci.UUID, "type=mig", "profile=3g.71gb", "parentUUID=" + gpu.UUID} {
		if !strings.Contains(string(content), line+"\n") {
			t.Errorf("device file lacks %q:\n%s", line, content)
		}
	}
	cp, err := loadCheckpoint(e.cfg.CheckpointPath)
	if err != nil {
		t.Fatal(err)
	}
	mig := cp.Claims[uid].Devices[0].MIG
	if mig == nil || *mig != (MIGDevice{GIID: gi.ID, CIID: ci.ID, UUID: ci.UUID}) {
		t.Errorf("checkpoint MIG device %+v, want GI %d CI %d %s", mig, gi.ID, ci.ID, ci.UUID)
	}
}

func TestDynamicMIGPrepareRefusesOverlappingPlacement(t *testing.T) {
	g := newSimGPU(t)
	e := newEnv(t)
	d := g.driver(t, e)
	if r := prepareOne(t, d, claim("d2000000-0000-4000-8000-000000000001", "big", result("mig", "gpu-0-mig-3g71gb-9-4"))); r.Err != nil {
		t.Fatal(r.Err)
	}
	uid := "d2000000-0000-4000-8000-000000000002"
	r := prepareOne(t, d, claim(uid, "small", result("mig", "gpu-0-mig-1g18gb-19-5")))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "Insufficient Resources") {
		t.Fatalf("err = %v, want the simulator's Insufficient Resources (slice 5 is the 3g's)", r.Err)
	}
	if got := giPlacements(g.state(t)); len(got) != 1 || got[0] != "3g.71gb@4" {
		t.Errorf("GPU instances %v, want only 3g.71gb@4", got)
	}
	if _, err := os.Stat(CDISpecPath(e.cfg.CDIRoot, uid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CDI spec of the refused claim: %v", err)
	}
	for _, p := range d.PreparedClaims() {
		if p == uid {
			t.Errorf("refused claim left in the checkpoint")
		}
	}
}

func TestDynamicMIGPrepareRefusedWhileMIGModeStaysOff(t *testing.T) {
	g := newSimGPU(t)
	// A process holds the GPU: enabling MIG mode stays pending, as on a real GPU.
	g.admin(t, "hold", "--gpu", "0", "--pid", "4242", "--name", "python3")
	e := newEnv(t)
	d := g.driver(t, e)
	uid := "d3000000-0000-4000-8000-000000000001"
	r := prepareOne(t, d, claim(uid, "small", result("mig", "gpu-0-mig-1g18gb-19-0")))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "MIG mode is Disabled (pending Enabled)") {
		t.Fatalf("err = %v", r.Err)
	}
	if gpu := g.state(t); len(gpu.GPUInstances) != 0 {
		t.Errorf("GPU instances %v, want none", giPlacements(gpu))
	}
	if got := d.PreparedClaims(); len(got) != 0 {
		t.Errorf("prepared claims %v, want none", got)
	}
}

func TestDynamicMIGUnprepareAfterRestartAndAgain(t *testing.T) {
	g := newSimGPU(t)
	e := newEnv(t)
	uid := "d4000000-0000-4000-8000-000000000001"
	c := claim(uid, "small", result("mig", "gpu-0-mig-1g18gb-19-6"))
	first := prepareOne(t, g.driver(t, e), c)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	// A plugin restart: the new process knows the MIG device from checkpoint.json only.
	restarted := g.driver(t, e)
	again := prepareOne(t, restarted, c)
	if again.Err != nil || len(g.state(t).GPUInstances) != 1 {
		t.Fatalf("prepare after restart: %v, GPU instances %v", again.Err, giPlacements(g.state(t)))
	}
	if err := unprepareOne(t, restarted, uid); err != nil {
		t.Fatal(err)
	}
	gpu := g.state(t)
	if len(gpu.GPUInstances) != 0 {
		t.Errorf("GPU instances after unprepare %v, want none", giPlacements(gpu))
	}
	if gpu.MIGModeCurrent != state.MIGDisabled {
		t.Errorf("MIG mode %s after the last MIG device went, want Disabled (Hopper toggles it)", gpu.MIGModeCurrent)
	}
	if err := unprepareOne(t, restarted, uid); err != nil {
		t.Errorf("second unprepare: %v", err)
	}
	if got := restarted.PreparedClaims(); len(got) != 0 {
		t.Errorf("prepared claims %v", got)
	}
}

func TestDynamicMIGUnprepareWhenInstanceIsGoneAlready(t *testing.T) {
	g := newSimGPU(t)
	e := newEnv(t)
	d := g.driver(t, e)
	uid := "d5000000-0000-4000-8000-000000000001"
	if r := prepareOne(t, d, claim(uid, "half", result("mig", "gpu-0-mig-4g71gb-5-0"))); r.Err != nil {
		t.Fatal(r.Err)
	}
	gi := g.state(t).GPUInstances[0]
	for _, args := range [][]string{
		{"mig", "-i", "0", "-gi", strconv.Itoa(gi.ID), "-ci", "0", "-dci"},
		{"mig", "-i", "0", "-gi", strconv.Itoa(gi.ID), "-dgi"},
	} {
		if out, err := g.mig.run(args...); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	if err := unprepareOne(t, d, uid); err != nil {
		t.Fatalf("unprepare of a MIG device destroyed out of band: %v", err)
	}
}

func TestDynamicMIGSevenSmallThenNoEighth(t *testing.T) {
	g := newSimGPU(t)
	e := newEnv(t)
	d := g.driver(t, e)
	for start := 0; start < 7; start++ {
		uid := "d6000000-0000-4000-8000-00000000000" + strconv.Itoa(start)
		if r := prepareOne(t, d, claim(uid, "s", result("mig", devices.MIGDeviceName(0, "1g.18gb", 19, start)))); r.Err != nil {
			t.Fatalf("1g.18gb at %d: %v", start, r.Err)
		}
	}
	// The simulator's rules: 1g.18gb has seven placements, and a 2g there overlaps.
	r := prepareOne(t, d, claim("d6000000-0000-4000-8000-000000000009", "two", result("mig", "gpu-0-mig-2g35gb-14-0")))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "Insufficient Resources") {
		t.Fatalf("2g.35gb over seven 1g.18gb: %v", r.Err)
	}
	if n := len(g.state(t).GPUInstances); n != 7 {
		t.Errorf("GPU instances %d, want 7", n)
	}
}

// fakeMIG records calls and fails Create for one placement.
type fakeMIG struct {
	failStart int
	created   map[int]bool
	deletes   []int
}

func (f *fakeMIG) Create(_ string, spec devices.DynamicMIG) (MIGDevice, error) {
	if spec.PlacementStart == f.failStart {
		return MIGDevice{}, errors.New("Insufficient Resources")
	}
	f.created[spec.PlacementStart] = true
	return MIGDevice{GIID: 7 + spec.PlacementStart, UUID: "MIG-fake-" + strconv.Itoa(spec.PlacementStart)}, nil
}

func (f *fakeMIG) Find(_ string, spec devices.DynamicMIG) (MIGDevice, bool, error) {
	return MIGDevice{GIID: 7 + spec.PlacementStart}, f.created[spec.PlacementStart], nil
}

func (f *fakeMIG) Delete(_ string, spec devices.DynamicMIG, _ *MIGDevice) error {
	f.deletes = append(f.deletes, spec.PlacementStart)
	delete(f.created, spec.PlacementStart)
	return nil
}

func TestDynamicMIGFailedPrepareDestroysWhatItCreated(t *testing.T) {
	e := newEnv(t)
	f := &fakeMIG{failStart: 1, created: map[int]bool{}}
	e.cfg.MIG = f
	d, err := New(e.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	infos := map[string]devices.Info{}
	for _, start := range []int{0, 1} {
		name := devices.MIGDeviceName(0, "1g.18gb", 19, start)
		infos[name] = devices.Info{Name: name, Type: devices.TypeMIG, Profile: "1g.18gb", ParentUUID: "GPU-x",
			DynamicMIG: &devices.DynamicMIG{GIProfileID: 19, PlacementStart: start, PlacementSize: 1}}
	}
	d.SetDevices(infos)
	uid := "d7000000-0000-4000-8000-000000000001"
	r := prepareOne(t, d, claim(uid, "two", result("a", "gpu-0-mig-1g18gb-19-0"), result("b", "gpu-0-mig-1g18gb-19-1")))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "device gpu-0-mig-1g18gb-19-1: Insufficient Resources") {
		t.Fatalf("err = %v", r.Err)
	}
	if len(f.created) != 0 || len(f.deletes) != 1 || f.deletes[0] != 0 {
		t.Errorf("left created %v, deleted %v; want the MIG device at 0 destroyed again", f.created, f.deletes)
	}
	raw, err := os.ReadFile(e.cfg.CheckpointPath)
	if err != nil {
		t.Fatal(err)
	}
	var cp Checkpoint
	if err := json.Unmarshal(raw, &cp); err != nil {
		t.Fatal(err)
	}
	if len(cp.Claims) != 0 {
		t.Errorf("checkpoint claims %v, want none", cp.Claims)
	}
}

func TestDynamicMIGPrepareFailsWhileTheDriverIsUnloaded(t *testing.T) {
	g := newSimGPU(t)
	e := newEnv(t)
	d := g.driver(t, e)
	// Unloaded under the plugin (only a bypassed in-use check gets here): the
	// simulator's nvidia-smi answers as the real one does without a driver.
	g.admin(t, "driver", "unload")
	uid := "d7000000-0000-4000-8000-000000000001"
	r := prepareOne(t, d, claim(uid, "small", result("mig", "gpu-0-mig-1g18gb-19-0")))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "couldn't communicate with the NVIDIA driver") {
		t.Fatalf("err = %v, want nvidia-smi's no-driver answer", r.Err)
	}
	if got := d.PreparedClaims(); len(got) != 0 {
		t.Errorf("prepared claims %v, want none", got)
	}
	// Loaded again: the same prepare goes through.
	g.admin(t, "driver", "load")
	if r := prepareOne(t, d, claim(uid, "small", result("mig", "gpu-0-mig-1g18gb-19-0"))); r.Err != nil {
		t.Fatalf("after the reload: %v", r.Err)
	}
	if got := giPlacements(g.state(t)); len(got) != 1 || got[0] != "1g.18gb@0" {
		t.Errorf("GPU instances %v, want 1g.18gb@0", got)
	}
}
