package devices

// Differential test: the devices this plugin publishes for a simulated H200 against the
// ResourceSlice that NVIDIA's real DRA kubelet plugin (v0.4.1) published for a real H200
// (tests/unit/data/gpu/h200-single/resourceslice-nvidia-dra-driver-0.4.1.json). The
// simulated H200 is made by the GPU simulator itself (`gpusim init`, Python, standard
// library only, run as on a lab node), not written by this test.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// repoRoot is the repository root, five levels above this package.
var repoRoot = filepath.Join("..", "..", "..", "..", "..")

const captureFile = "tests/unit/data/gpu/h200-single/resourceslice-nvidia-dra-driver-0.4.1.json"

// identityAttributes are the attributes whose values name one card or its slot; the
// comparison checks their presence and type, not their value.
var identityAttributes = map[string]bool{
	"uuid":                            true,
	"resource.kubernetes.io/pciBusID": true,
	"resource.kubernetes.io/pcieRoot": true,
}

func loadCapture(t *testing.T) resourceapi.ResourceSlice {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, captureFile))
	if err != nil {
		t.Fatalf("read the real capture: %v", err)
	}
	var slice resourceapi.ResourceSlice
	if err := json.Unmarshal(data, &slice); err != nil {
		t.Fatalf("decode %s: %v", captureFile, err)
	}
	return slice
}

// simulatedH200 runs the GPU simulator's `gpusim init` for one H200 and reads the state
// file it wrote, as the plugin does on a lab node.
func simulatedH200(t *testing.T) *state.State {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to run the GPU simulator (gpufleet/lab/gpusim): %v", err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.json")
	cmd := exec.Command(python, "-m", "gpufleet.lab.gpusim", "admin", "--state", path,
		"init", "--model", "NVIDIA H200", "--count", "1", "--node-name", "h200-sim")
	// On a lab node the installer puts the collection's MIG modules under their package
	// path; here the repository's .collections directory (a link to it) plays that part.
	cmd.Env = append(os.Environ(), "PYTHONPATH="+root+string(os.PathListSeparator)+
		filepath.Join(root, ".collections"))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gpusim init: %v\n%s", err, out)
	}
	s, _, err := state.Load(path)
	if err != nil {
		t.Fatalf("load the simulator's state: %v", err)
	}
	return s
}

// attributeType names the one value field an attribute sets ("" when none or several).
func attributeType(a resourceapi.DeviceAttribute) string {
	var kinds []string
	if a.StringValue != nil {
		kinds = append(kinds, "string")
	}
	if a.VersionValue != nil {
		kinds = append(kinds, "version")
	}
	if a.IntValue != nil {
		kinds = append(kinds, "int")
	}
	if a.BoolValue != nil {
		kinds = append(kinds, "bool")
	}
	return strings.Join(kinds, "+")
}

func keys[V any](m map[resourceapi.QualifiedName]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

func TestSimulatedH200MatchesRealNVIDIADriverCapture(t *testing.T) {
	real := loadCapture(t)
	res, err := Build(simulatedH200(t))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if real.Spec.Driver != DriverName {
		t.Fatalf("driver: capture %q, simulator %q", real.Spec.Driver, DriverName)
	}
	if len(res.Devices) != len(real.Spec.Devices) {
		t.Fatalf("device count: capture %d, simulator %d (%v)", len(real.Spec.Devices), len(res.Devices), names(res.Devices))
	}
	for i, want := range real.Spec.Devices {
		got := res.Devices[i]
		if gk, wk := keys(got.Attributes), keys(want.Attributes); strings.Join(gk, ",") != strings.Join(wk, ",") {
			t.Errorf("device %d attribute keys:\n simulator %v\n capture   %v", i, gk, wk)
		}
		for name, wa := range want.Attributes {
			ga, ok := got.Attributes[name]
			if !ok {
				continue // reported above
			}
			if gt, wt := attributeType(ga), attributeType(wa); gt != wt {
				t.Errorf("device %d attribute %s: simulator type %q, capture %q", i, name, gt, wt)
				continue
			}
			if identityAttributes[string(name)] {
				continue
			}
			if gj, wj := mustJSON(t, ga), mustJSON(t, wa); gj != wj {
				t.Errorf("device %d attribute %s: simulator %s, capture %s", i, name, gj, wj)
			}
		}
		if gk, wk := keys(got.Capacity), keys(want.Capacity); strings.Join(gk, ",") != strings.Join(wk, ",") {
			t.Errorf("device %d capacity keys:\n simulator %v\n capture   %v", i, gk, wk)
		}
		for name, wc := range want.Capacity {
			if gc, ok := got.Capacity[name]; ok && gc.Value.Cmp(wc.Value) != 0 {
				t.Errorf("device %d capacity %s: simulator %s, capture %s", i, name, gc.Value.String(), wc.Value.String())
			}
		}
	}
}

// The comparison itself must notice a missing attribute: drop one the capture has from
// the simulated state (the PCIe root) and the key sets differ.
func TestCaptureComparisonSeesAMissingAttribute(t *testing.T) {
	real := loadCapture(t)
	s := simulatedH200(t)
	s.GPUs[0].PCIeRoot = ""
	res, err := Build(s)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if strings.Join(keys(res.Devices[0].Attributes), ",") == strings.Join(keys(real.Spec.Devices[0].Attributes), ",") {
		t.Fatal("attribute keys equal although resource.kubernetes.io/pcieRoot was left out")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
