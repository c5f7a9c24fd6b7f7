package deviceplugin

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/driver"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

const (
	uuid0 = "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90"
	uuid1 = "GPU-2a7b0d3f-1c5e-4f9b-8d40-6e3f8b2c9da1"
	hook  = "/opt/nvidia/toolkit/nvidia-cdi-hook"
	// wait bounds every wait for the plugin; the poll interval is far shorter.
	wait = 10 * time.Second
)

// twoH200 is the state of two simulated H200s; GPU 1 has MIG enabled, which MIG
// strategy none still lists as a whole GPU.
func twoH200() *state.State {
	gpu := func(index int, uuid, busID, mig string) state.GPU {
		return state.GPU{
			Index: index, Minor: index, UUID: uuid, Name: "NVIDIA H200", Brand: "Nvidia",
			Architecture: "Hopper", ComputeCapability: "9.0", PCIBusID: busID, MemoryMiB: 143771,
			MIGCapable: true, MIGModeCurrent: mig, MIGModePending: mig,
		}
	}
	return &state.State{
		Schema: 1, Simulator: "gpufleet GPU simulator", DriverVersion: "580.159.04", CUDAVersion: "13.0",
		// Listed out of index order: the plugin lists by index.
		GPUs: []state.GPU{
			gpu(1, uuid1, "00000000:2A:00.0", state.MIGEnabled),
			gpu(0, uuid0, "00000000:19:00.0", state.MIGDisabled),
		},
	}
}

func writeState(t *testing.T, path string, s *state.State) {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := driver.WriteFileAtomic(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeKubelet is the kubelet's side of registration: a real gRPC Registration
// server on a unix socket, recording every RegisterRequest.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	server     *grpc.Server
	registered chan *pluginapi.RegisterRequest
}

func startKubelet(t *testing.T, socket string) *fakeKubelet {
	t.Helper()
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{server: grpc.NewServer(), registered: make(chan *pluginapi.RegisterRequest, 10)}
	pluginapi.RegisterRegistrationServer(k.server, k)
	go func() { _ = k.server.Serve(ln) }()
	t.Cleanup(k.server.Stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.registered <- r
	return &pluginapi.Empty{}, nil
}

// stop stops the server; its socket file goes with its listener.
func (k *fakeKubelet) stop() { k.server.Stop() }

func (k *fakeKubelet) nextRegister(t *testing.T) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.registered:
		return r
	case <-time.After(wait):
		t.Fatal("the plugin did not register with the kubelet")
		return nil
	}
}

type env struct {
	dir, kubeletSocket, stateFile string
	cfg                           Config
}

func newEnv(t *testing.T) env {
	t.Helper()
	// Short: a unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "gpusim-dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e := env{dir: dir, kubeletSocket: filepath.Join(dir, "device-plugins", "kubelet.sock"), stateFile: filepath.Join(dir, "state.json")}
	if err := os.MkdirAll(filepath.Dir(e.kubeletSocket), 0o750); err != nil {
		t.Fatal(err)
	}
	e.cfg = Config{
		KubeletSocket: e.kubeletSocket, StateFile: e.stateFile, CDIRoot: filepath.Join(dir, "cdi"),
		DevicesDir: filepath.Join(dir, "devices"), NVIDIACDIHookPath: hook, PollInterval: 20 * time.Millisecond,
	}
	return e
}

// startPlugin runs the plugin until the test ends.
func startPlugin(t *testing.T, cfg Config) *Plugin {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p
}

// dialPlugin connects to the endpoint a RegisterRequest names, as the kubelet does:
// the endpoint is a file name in the directory of the kubelet's socket.
func dialPlugin(t *testing.T, kubeletSocket string, r *pluginapi.RegisterRequest) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(filepath.Dir(kubeletSocket), r.Endpoint),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

func listAndWatch(t *testing.T, c pluginapi.DevicePluginClient) pluginapi.DevicePlugin_ListAndWatchClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

func recvDevices(t *testing.T, stream pluginapi.DevicePlugin_ListAndWatchClient) []string {
	t.Helper()
	got := make(chan []string, 1)
	go func() {
		r, err := stream.Recv()
		if err != nil {
			t.Errorf("ListAndWatch: %v", err)
			got <- nil
			return
		}
		var ids []string
		for _, d := range r.Devices {
			if d.Health != pluginapi.Healthy {
				t.Errorf("device %s health = %q, want %q", d.ID, d.Health, pluginapi.Healthy)
			}
			ids = append(ids, d.ID)
		}
		got <- ids
	}()
	select {
	case ids := <-got:
		return ids
	case <-time.After(wait):
		t.Fatal("ListAndWatch sent nothing")
		return nil
	}
}

func TestRegistersListsAndAllocatesTheSimulatedGPUs(t *testing.T) {
	e := newEnv(t)
	writeState(t, e.stateFile, twoH200())
	kubelet := startKubelet(t, e.kubeletSocket)
	startPlugin(t, e.cfg)

	r := kubelet.nextRegister(t)
	if r.ResourceName != "nvidia.com/gpu" || r.Endpoint != "nvidia-gpu.sock" || r.Version != "v1beta1" {
		t.Fatalf("Register(resource=%q, endpoint=%q, version=%q); want nvidia.com/gpu, nvidia-gpu.sock, v1beta1",
			r.ResourceName, r.Endpoint, r.Version)
	}
	if r.Options == nil || !r.Options.GetPreferredAllocationAvailable || r.Options.PreStartRequired {
		t.Errorf("Register options = %+v; want GetPreferredAllocationAvailable only", r.Options)
	}

	c := dialPlugin(t, e.kubeletSocket, r)
	ctx := context.Background()
	opts, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil || !opts.GetPreferredAllocationAvailable || opts.PreStartRequired {
		t.Fatalf("GetDevicePluginOptions = %+v, %v", opts, err)
	}
	stream := listAndWatch(t, c)
	if ids := recvDevices(t, stream); !reflect.DeepEqual(ids, []string{uuid0, uuid1}) {
		t.Fatalf("ListAndWatch devices = %v; want the GPU UUIDs by index %v", ids, []string{uuid0, uuid1})
	}

	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{uuid1}},
		{DevicesIds: []string{uuid0, uuid1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ContainerResponses) != 2 {
		t.Fatalf("Allocate answered %d containers, want 2", len(resp.ContainerResponses))
	}
	for i, want := range []struct {
		env string
		cdi []string
	}{
		{uuid1, []string{"k8s.device-plugin.nvidia.com/gpu=" + uuid1}},
		{uuid0 + "," + uuid1, []string{"k8s.device-plugin.nvidia.com/gpu=" + uuid0, "k8s.device-plugin.nvidia.com/gpu=" + uuid1}},
	} {
		cr := resp.ContainerResponses[i]
		if !reflect.DeepEqual(cr.Envs, map[string]string{"NVIDIA_VISIBLE_DEVICES": want.env}) {
			t.Errorf("container %d envs = %v; want NVIDIA_VISIBLE_DEVICES=%s", i, cr.Envs, want.env)
		}
		var names []string
		for _, d := range cr.CdiDevices {
			names = append(names, d.Name)
		}
		if !reflect.DeepEqual(names, want.cdi) {
			t.Errorf("container %d CDI devices = %v; want %v", i, names, want.cdi)
		}
		if len(cr.Mounts) != 0 || len(cr.Devices) != 0 {
			t.Errorf("container %d mounts %v devices %v; the CDI spec carries the mounts, no device node exists", i, cr.Mounts, cr.Devices)
		}
	}

	// Every CDI device handed out is in the spec the plugin wrote, with its device file.
	spec := readSpec(t, CDISpecPath(e.cfg.CDIRoot))
	if spec.Kind != "k8s.device-plugin.nvidia.com/gpu" {
		t.Errorf("spec kind = %q", spec.Kind)
	}
	for _, uuid := range []string{uuid0, uuid1} {
		d := specDevice(t, spec, uuid)
		file := d.ContainerEdits.Mounts[0].HostPath
		data, err := os.ReadFile(file)
		if err != nil || !strings.Contains(string(data), "\nuuid="+uuid+"\n") {
			t.Errorf("device file %s of %s: %q, %v", file, uuid, data, err)
		}
	}

	if _, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"GPU-00000000-0000-4000-8000-000000000000"}},
	}}); err == nil || !strings.Contains(err.Error(), "unknown device: GPU-00000000-0000-4000-8000-000000000000") {
		t.Errorf("Allocate of an unknown device: err = %v", err)
	}

	pref, err := c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{uuid1, uuid0}, AllocationSize: 1},
		{AvailableDeviceIDs: []string{uuid1, uuid0}, MustIncludeDeviceIDs: []string{uuid1}, AllocationSize: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := [][]string{pref.ContainerResponses[0].DeviceIDs, pref.ContainerResponses[1].DeviceIDs}; !reflect.DeepEqual(got, [][]string{{uuid0}, {uuid1}}) {
		t.Errorf("preferred allocations = %v; want [[%s] [%s]] (lowest index, then what must be included)", got, uuid0, uuid1)
	}

	pre, err := c.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: []string{uuid0}})
	if err != nil || pre == nil {
		t.Errorf("PreStartContainer = %v, %v", pre, err)
	}

	// GPU 1 leaves the state: the stream sends the new list, the spec drops the GPU.
	s := twoH200()
	s.GPUs = s.GPUs[1:]
	writeState(t, e.stateFile, s)
	if ids := recvDevices(t, stream); !reflect.DeepEqual(ids, []string{uuid0}) {
		t.Fatalf("ListAndWatch after GPU 1 left = %v; want [%s]", ids, uuid0)
	}
	spec = readSpec(t, CDISpecPath(e.cfg.CDIRoot))
	if len(spec.Devices) != 1 || spec.Devices[0].Name != uuid0 {
		t.Errorf("spec devices after GPU 1 left = %+v", spec.Devices)
	}
	if _, err := os.Stat(DeviceFilePath(e.cfg.DevicesDir, "gpu-1")); !os.IsNotExist(err) {
		t.Errorf("device file of GPU 1 left behind: %v", err)
	}
	if _, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{uuid1}},
	}}); err == nil {
		t.Error("Allocate of a GPU gone from the state succeeded")
	}
}

func TestRegistersAgainWhenTheKubeletSocketIsCreatedAgain(t *testing.T) {
	e := newEnv(t)
	writeState(t, e.stateFile, twoH200())
	kubelet := startKubelet(t, e.kubeletSocket)
	p := startPlugin(t, e.cfg)
	kubelet.nextRegister(t)

	// No change, no registration: several checks pass without one.
	select {
	case r := <-kubelet.registered:
		t.Fatalf("registered again with an unchanged kubelet socket: %+v", r)
	case <-time.After(10 * e.cfg.PollInterval):
	}

	// A kubelet restart: the old kubelet goes, the new one removes the plugins'
	// sockets (its device manager empties the directory) and creates kubelet.sock.
	kubelet.stop()
	if err := os.Remove(p.Endpoint()); err != nil {
		t.Fatal(err)
	}
	kubelet = startKubelet(t, e.kubeletSocket)
	r := kubelet.nextRegister(t)
	if r.ResourceName != ResourceName || r.Endpoint != SocketName || r.Version != pluginapi.Version {
		t.Fatalf("second Register = %+v", r)
	}
	stream := listAndWatch(t, dialPlugin(t, e.kubeletSocket, r))
	if ids := recvDevices(t, stream); !reflect.DeepEqual(ids, []string{uuid0, uuid1}) {
		t.Fatalf("ListAndWatch after the kubelet restart = %v", ids)
	}

	// kubelet.sock created again with the plugin's socket left in place: registered again.
	kubelet.stop()
	kubelet = startKubelet(t, e.kubeletSocket)
	r = kubelet.nextRegister(t)
	stream = listAndWatch(t, dialPlugin(t, e.kubeletSocket, r))
	if ids := recvDevices(t, stream); !reflect.DeepEqual(ids, []string{uuid0, uuid1}) {
		t.Fatalf("ListAndWatch after kubelet.sock was created again = %v", ids)
	}
}

func TestWaitsForTheKubeletSocket(t *testing.T) {
	e := newEnv(t)
	writeState(t, e.stateFile, twoH200())
	startPlugin(t, e.cfg)
	time.Sleep(5 * e.cfg.PollInterval)
	kubelet := startKubelet(t, e.kubeletSocket)
	if r := kubelet.nextRegister(t); r.ResourceName != ResourceName {
		t.Fatalf("Register = %+v", r)
	}
}

func TestNoStateFileListsNoDevice(t *testing.T) {
	e := newEnv(t)
	kubelet := startKubelet(t, e.kubeletSocket)
	startPlugin(t, e.cfg)
	stream := listAndWatch(t, dialPlugin(t, e.kubeletSocket, kubelet.nextRegister(t)))
	if ids := recvDevices(t, stream); len(ids) != 0 {
		t.Fatalf("devices without a state file = %v", ids)
	}
	if _, err := os.Stat(CDISpecPath(e.cfg.CDIRoot)); !os.IsNotExist(err) {
		t.Errorf("a CDI spec without devices was written: %v", err)
	}
	// The simulator's first state: the devices appear on the open stream.
	writeState(t, e.stateFile, twoH200())
	if ids := recvDevices(t, stream); !reflect.DeepEqual(ids, []string{uuid0, uuid1}) {
		t.Fatalf("devices after the state was written = %v", ids)
	}
}

// The device-plugin spec gives a whole GPU what the DRA mode's per-claim spec
// gives it, but for NVIDIA_VISIBLE_DEVICES, which Allocate sets for all GPUs at once.
func TestCDISpecInjectsWhatTheDRAModeInjectsForAWholeGPU(t *testing.T) {
	gpus, err := GPUs(twoH200())
	if err != nil {
		t.Fatal(err)
	}
	wantInfo := devices.Info{
		Name: "gpu-0", Type: "gpu", UUID: uuid0, GPUMinor: 0, GPUIndex: 0, ProductName: "NVIDIA H200",
		PCIBusID: "0000:19:00.0", MemoryMiB: 143771,
	}
	if len(gpus) != 2 || gpus[0] != wantInfo || gpus[1].UUID != uuid1 || gpus[1].Name != "gpu-1" {
		t.Fatalf("GPUs = %+v", gpus)
	}
	spec := BuildCDISpec("/var/run/gpufleet-gpu-simulator/device-plugin", hook, gpus)
	if err := cdispec.ValidateVersion(spec); err != nil {
		t.Fatalf("CDI version %s: %v", spec.Version, err)
	}
	claimUID := "0b1c2d3e-0000-4000-8000-00000000c1a1"
	dra := driver.BuildCDISpec("/var/run/gpufleet-gpu-simulator/claims", claimUID, hook,
		[]driver.PreparedDevice{{Device: "gpu-0", Info: gpus[0]}})
	got, want := specDevice(t, spec, uuid0).ContainerEdits, dra.Devices[0].ContainerEdits

	if !reflect.DeepEqual(got.Hooks, want.Hooks) {
		t.Errorf("hooks = %+v; DRA mode: %+v", got.Hooks, want.Hooks)
	}
	if len(got.Mounts) != len(want.Mounts) {
		t.Fatalf("mounts = %+v; DRA mode: %+v", got.Mounts, want.Mounts)
	}
	for i := range want.Mounts {
		g, w := *got.Mounts[i], *want.Mounts[i]
		if g.HostPath != "/var/run/gpufleet-gpu-simulator/device-plugin/gpu-0" {
			t.Errorf("mount %d host path = %s", i, g.HostPath)
		}
		g.HostPath, w.HostPath = "", ""
		if !reflect.DeepEqual(g, w) {
			t.Errorf("mount %d = %+v; DRA mode: %+v", i, g, w)
		}
	}
	wantEnv := []string{}
	for _, v := range want.Env {
		if !strings.HasPrefix(v, "NVIDIA_VISIBLE_DEVICES=") {
			wantEnv = append(wantEnv, v)
		}
	}
	if !reflect.DeepEqual(got.Env, wantEnv) || !reflect.DeepEqual(want.Env, []string{"NVIDIA_VISIBLE_DEVICES=" + uuid0, "GPUFLEET_SIMULATED_GPU=gpu-0"}) {
		t.Errorf("env = %v; DRA mode: %v", got.Env, want.Env)
	}

	content := DeviceFileContent(gpus[0])
	for _, line := range []string{"resource=nvidia.com/gpu", "device=gpu-0", "type=gpu", "uuid=" + uuid0,
		"productName=NVIDIA H200", "pciBusID=0000:19:00.0", "memoryMiB=143771"} {
		if !strings.Contains(content, "\n"+line+"\n") {
			t.Errorf("device file lacks %q:\n%s", line, content)
		}
	}
}

func TestGPUsRefusesADuplicateUUID(t *testing.T) {
	s := twoH200()
	s.GPUs[0].UUID = uuid0
	if _, err := GPUs(s); err == nil || !strings.Contains(err.Error(), "gpu 1 uuid="+uuid0+" is used by another GPU") {
		t.Fatalf("err = %v", err)
	}
}

func readSpec(t *testing.T, path string) *cdispec.Spec {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	return &spec
}

func specDevice(t *testing.T, spec *cdispec.Spec, name string) cdispec.Device {
	t.Helper()
	for _, d := range spec.Devices {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("CDI spec has no device %q", name)
	return cdispec.Device{}
}

// Unloaded under a running plugin (only a bypassed in-use check gets there), the
// state's GPUs are not read: the devices listed before stay listed.
func TestUnloadedDriverKeepsTheDevicesListedBefore(t *testing.T) {
	e := newEnv(t)
	p, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeState(t, e.stateFile, twoH200())
	p.refresh(context.Background())
	listed := func() []string {
		devs, _ := p.snapshot()
		ids := make([]string, len(devs))
		for i, d := range devs {
			ids[i] = d.ID
		}
		return ids
	}
	if ids := listed(); !reflect.DeepEqual(ids, []string{uuid0, uuid1}) {
		t.Fatalf("listed = %v", ids)
	}
	unloaded := twoH200()
	unloaded.GPUs = unloaded.GPUs[:1]
	no := false
	unloaded.DriverLoadedField = &no
	writeState(t, e.stateFile, unloaded)
	p.refresh(context.Background())
	if ids := listed(); !reflect.DeepEqual(ids, []string{uuid0, uuid1}) {
		t.Fatalf("listed while unloaded = %v, want the devices listed before", ids)
	}
}
