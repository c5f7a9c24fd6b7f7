// Package deviceplugin is the device-plugin mode of the GPU simulator: it stands in
// for NVIDIA's device plugin (NVIDIA/k8s-device-plugin) on lab nodes that hand out
// GPUs as the extended resource nvidia.com/gpu instead of through DRA.
//
// It speaks the kubelet's device plugin API v1beta1
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1) as NVIDIA's plugin does (read in
// v0.17.4: internal/plugin/server.go, internal/rm, cmd/nvidia-device-plugin/main.go),
// with its default settings where they apply (MIG strategy none, device ID strategy
// uuid, no sharing):
//
//   - it serves its endpoint nvidia-gpu.sock in the directory of the kubelet's
//     registration socket (/var/lib/kubelet/device-plugins/kubelet.sock) and
//     registers resource nvidia.com/gpu there, with GetPreferredAllocation available;
//   - ListAndWatch lists one Healthy device per GPU of the simulator's state file,
//     its ID the GPU UUID (a GPU whose MIG mode is enabled too, as with MIG strategy
//     none), and sends the list again when the state's GPUs change;
//   - Allocate answers as NVIDIA's plugin with deviceListStrategy envvar and cdi-cri:
//     NVIDIA_VISIBLE_DEVICES=<UUID,...> and one CDI device
//     k8s.device-plugin.nvidia.com/gpu=<UUID> per GPU (see cdi.go), whose spec gives
//     the container what the DRA mode gives it for a whole GPU;
//   - when kubelet.sock is created again (the kubelet restarted, which also removes
//     the plugins' sockets), it serves its endpoint anew and registers again.
//
// The simulated GPUs have no device nodes and no health events: every device stays
// Healthy, no DeviceSpec is returned, PreStartContainer does nothing.
package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/driver"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

const (
	// ResourceName is the extended resource of NVIDIA's device plugin for whole GPUs.
	ResourceName = "nvidia.com/gpu"
	// SocketName is the plugin's endpoint in the kubelet's device plugin directory:
	// "nvidia-" and the resource name's part after the slash, as NVIDIA's plugin
	// names it (getPluginSocketPath).
	SocketName = "nvidia-gpu.sock"
	// DefaultDevicesDir is the host directory of the GPUs' device files.
	DefaultDevicesDir = "/var/run/gpufleet-gpu-simulator/device-plugin"
	// registerTimeout bounds one Register call, as NVIDIA's plugin bounds its dial.
	registerTimeout = 5 * time.Second
)

// Config is where the plugin finds the kubelet and the state, and keeps its files.
type Config struct {
	// KubeletSocket is the kubelet's registration socket; the plugin's endpoint
	// goes in the same directory (pluginapi.KubeletSocket on a node).
	KubeletSocket string
	StateFile     string // the simulator's state file
	CDIRoot       string // e.g. /var/run/cdi
	DevicesDir    string // DefaultDevicesDir on a node
	// NVIDIACDIHookPath is the node's nvidia-cdi-hook that the CDI spec calls;
	// empty means driver.DefaultNVIDIACDIHookPath.
	NVIDIACDIHookPath string
	// PollInterval is how often the state file and the kubelet socket are checked.
	PollInterval time.Duration
}

// Plugin implements the kubelet's DevicePlugin service for the simulated GPUs.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	cfg Config

	mu      sync.Mutex
	gpus    []devices.Info // by GPU index
	byUUID  map[string]devices.Info
	changed chan struct{} // closed and replaced when gpus change

	// Owned by Run.
	written    bool // the files of gpus are on disk
	stateErr   string
	waiting    bool
	server     *grpc.Server
	endpointID socketID // the endpoint this process serves
	registered socketID // the kubelet socket it registered with; zero: not registered
}

// New returns a plugin that lists no device until Run reads the state.
func New(cfg Config) (*Plugin, error) {
	if cfg.KubeletSocket == "" {
		return nil, errors.New("kubelet socket is empty; set --kubelet-socket")
	}
	if cfg.NVIDIACDIHookPath == "" {
		cfg.NVIDIACDIHookPath = driver.DefaultNVIDIACDIHookPath
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	return &Plugin{cfg: cfg, byUUID: map[string]devices.Info{}, changed: make(chan struct{})}, nil
}

// Endpoint is the path of the plugin's gRPC socket.
func (p *Plugin) Endpoint() string {
	return filepath.Join(filepath.Dir(p.cfg.KubeletSocket), SocketName)
}

// GPUs returns the whole GPUs of the state, by GPU index (NVML's order, which
// NVIDIA's plugin enumerates in), whatever their MIG mode (MIG strategy none).
//
// Errors: a PCI bus ID that cannot be converted, or a UUID used twice.
func GPUs(s *state.State) ([]devices.Info, error) {
	gpus := append([]state.GPU(nil), s.GPUs...)
	sort.SliceStable(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	out := make([]devices.Info, 0, len(gpus))
	seen := map[string]bool{}
	for _, g := range gpus {
		bdf, err := devices.PCIBusIDToBDF(g.PCIBusID)
		if err != nil {
			return nil, fmt.Errorf("gpu %d pci_bus_id: %w", g.Index, err)
		}
		if seen[g.UUID] {
			return nil, fmt.Errorf("gpu %d uuid=%s is used by another GPU; UUIDs must be unique", g.Index, g.UUID)
		}
		seen[g.UUID] = true
		out = append(out, devices.Info{
			Name: devices.GPUDeviceName(g.Minor), Type: devices.TypeGPU, UUID: g.UUID,
			GPUMinor: g.Minor, GPUIndex: g.Index, ProductName: g.Name, PCIBusID: bdf, MemoryMiB: g.MemoryMiB,
		})
	}
	return out, nil
}

// Run serves the plugin until ctx ends: it reads the state, writes the device files
// and the CDI spec, serves the endpoint and registers with the kubelet, then every
// PollInterval picks up state changes and registers again after a kubelet restart.
// A failed registration is logged and retried at the next check.
func (p *Plugin) Run(ctx context.Context) error {
	defer p.stopServer()
	p.refresh(ctx)
	p.sync(ctx)
	ticker := time.NewTicker(p.cfg.PollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			klog.FromContext(ctx).Info("Shutting down", "cause", context.Cause(ctx))
			return nil
		case <-ticker.C:
			p.refresh(ctx)
			p.sync(ctx)
		}
	}
}

// refresh reads the state file and, when its GPUs differ from those listed,
// writes their files and sends the new list to every ListAndWatch stream. A
// missing state file is no GPU; an unusable one, or one whose driver is not
// loaded, keeps the GPUs listed before.
func (p *Plugin) refresh(ctx context.Context) {
	logger := klog.FromContext(ctx)
	s, _, err := state.Load(p.cfg.StateFile)
	var gpus []devices.Info
	switch {
	case errors.Is(err, os.ErrNotExist):
		err = nil
		gpus = []devices.Info{}
	case err == nil && !s.DriverLoaded():
		// Only a bypassed in-use check unloads the driver under a running plugin.
		if p.stateErr != "driver not loaded" {
			logger.Info("Warning: the NVIDIA driver is not loaded; keeping the devices listed before", "path", p.cfg.StateFile)
			p.stateErr = "driver not loaded"
		}
		return
	case err == nil:
		gpus, err = GPUs(s)
		if err != nil {
			err = fmt.Errorf("%s: %w", p.cfg.StateFile, err)
		}
	}
	if err != nil {
		if err.Error() != p.stateErr {
			logger.Error(err, "State file unusable; keeping the devices listed before", "path", p.cfg.StateFile)
			p.stateErr = err.Error()
		}
		return
	}
	p.stateErr = ""
	p.mu.Lock()
	same := reflect.DeepEqual(p.gpus, gpus)
	p.mu.Unlock()
	if same && p.written {
		return
	}
	if err := writeFiles(p.cfg.CDIRoot, p.cfg.DevicesDir, p.cfg.NVIDIACDIHookPath, gpus); err != nil {
		logger.Error(err, "Writing the CDI spec failed; keeping the devices listed before", "cdiRoot", p.cfg.CDIRoot)
		return
	}
	p.written = true
	p.setGPUs(gpus)
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = g.UUID
	}
	logger.Info("Listing devices", "resource", ResourceName, "count", len(gpus), "ids", ids)
}

func (p *Plugin) setGPUs(gpus []devices.Info) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gpus = gpus
	p.byUUID = make(map[string]devices.Info, len(gpus))
	for _, g := range gpus {
		p.byUUID[g.UUID] = g
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// socketID tells one socket file from another created later at the same path.
type socketID struct {
	dev, ino uint64
	mtime    int64 // ns
}

func statSocket(path string) (socketID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return socketID{}, err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return socketID{}, fmt.Errorf("%s is not a socket (mode %s)", path, fi.Mode())
	}
	id := socketID{mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), uint64(st.Ino) // not uint64 on every platform
	}
	return id, nil
}

// sync registers with the kubelet when the plugin has not registered with the
// kubelet socket there now: at start, after the socket was created again, or
// after the plugin's own socket was removed. Like NVIDIA's plugin on a new
// kubelet.sock, it restarts its gRPC server first.
func (p *Plugin) sync(ctx context.Context) {
	logger := klog.FromContext(ctx)
	kubelet, err := statSocket(p.cfg.KubeletSocket)
	if err != nil {
		if !p.waiting {
			logger.Info("Waiting for the kubelet's registration socket", "path", p.cfg.KubeletSocket, "reason", err.Error())
			p.waiting = true
		}
		return
	}
	p.waiting = false
	endpoint, err := statSocket(p.Endpoint())
	if p.server != nil && err == nil && endpoint == p.endpointID && kubelet == p.registered {
		return
	}
	if p.server != nil {
		logger.Info("Kubelet socket created again or endpoint removed; serving anew and registering again",
			"kubeletSocket", p.cfg.KubeletSocket, "endpoint", p.Endpoint())
	}
	p.registered = socketID{}
	if err := p.startServer(ctx); err != nil {
		logger.Error(err, "Serving the device plugin endpoint failed; retrying", "endpoint", p.Endpoint())
		return
	}
	if err := p.register(ctx); err != nil {
		logger.Error(err, "Registration with the kubelet failed; retrying", "kubeletSocket", p.cfg.KubeletSocket)
		return
	}
	p.registered = kubelet
	logger.Info("Registered with the kubelet", "resource", ResourceName, "endpoint", SocketName,
		"version", pluginapi.Version, "kubeletSocket", p.cfg.KubeletSocket)
}

func (p *Plugin) startServer(ctx context.Context) error {
	p.stopServer()
	path := p.Endpoint()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	id, err := statSocket(path)
	if err != nil {
		_ = ln.Close()
		return err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() {
		if err := srv.Serve(ln); err != nil {
			klog.FromContext(ctx).Error(err, "Device plugin gRPC server stopped", "endpoint", path)
		}
	}()
	p.server, p.endpointID = srv, id
	return nil
}

// stopServer stops the gRPC server (ending every ListAndWatch stream) and removes
// its socket.
func (p *Plugin) stopServer() {
	if p.server == nil {
		return
	}
	p.server.Stop()
	p.server, p.endpointID = nil, socketID{}
}

// register calls Register of the kubelet's Registration service.
func (p *Plugin) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+p.cfg.KubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     SocketName,
		ResourceName: ResourceName,
		Options:      options(),
	})
	return err
}

func options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
}

// GetDevicePluginOptions: GetPreferredAllocation is available; no PreStartContainer.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return options(), nil
}

func (p *Plugin) snapshot() ([]*pluginapi.Device, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	devs := make([]*pluginapi.Device, len(p.gpus))
	for i, g := range p.gpus {
		devs[i] = &pluginapi.Device{ID: g.UUID, Health: pluginapi.Healthy}
	}
	return devs, p.changed
}

// ListAndWatch sends the GPUs, then the new list each time they change, until
// the kubelet goes away or the server stops.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		devs, changed := p.snapshot()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-s.Context().Done():
			return nil
		}
	}
}

// GetPreferredAllocation prefers, after the devices that must be included, the
// available GPUs of lowest index. The simulated GPUs of a node are all joined
// alike (NVLink between every pair, or none), so no choice is better aligned.
func (p *Plugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	byUUID := p.byUUID
	p.mu.Unlock()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, req := range r.ContainerRequests {
		size := int(req.AllocationSize)
		ids := append([]string(nil), req.MustIncludeDeviceIDs...)
		available := slices.Clone(req.AvailableDeviceIDs)
		sort.SliceStable(available, func(i, j int) bool {
			gi, iok := byUUID[available[i]]
			gj, jok := byUUID[available[j]]
			if iok != jok {
				return iok
			}
			return gi.GPUIndex < gj.GPUIndex
		})
		for _, id := range available {
			if len(ids) >= size {
				break
			}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate answers each container request with NVIDIA_VISIBLE_DEVICES=<UUID,...>
// and the CDI devices k8s.device-plugin.nvidia.com/gpu=<UUID> of its GPUs.
//
// Errors: a device ID that is not a GPU listed now (as NVIDIA's plugin refuses an
// unknown device).
func (p *Plugin) Allocate(ctx context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	byUUID := p.byUUID
	p.mu.Unlock()
	resp := &pluginapi.AllocateResponse{}
	for _, req := range r.ContainerRequests {
		c := &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{driver.EnvVisibleDevices: strings.Join(req.DevicesIds, ",")},
		}
		for _, id := range req.DevicesIds {
			if _, ok := byUUID[id]; !ok {
				return nil, fmt.Errorf("invalid allocation request for %q: unknown device: %s", ResourceName, id)
			}
			c.CdiDevices = append(c.CdiDevices, &pluginapi.CDIDevice{Name: CDIDeviceID(id)})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, c)
	}
	klog.FromContext(ctx).V(2).Info("Allocated", "resource", ResourceName, "containers", len(resp.ContainerResponses))
	return resp, nil
}

// PreStartContainer is not requested (GetDevicePluginOptions) and does nothing.
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
