// Command gpusim-kubelet-plugin is the DRA kubelet plugin of the gpufleet GPU
// simulator. It stands in for the NVIDIA DRA driver's GPU kubelet plugin
// (driver gpu.nvidia.com) on lab nodes that have no GPU: it publishes
// ResourceSlices shaped like the NVIDIA driver's from the simulator's state file,
// republishes them when the (simulated) MIG layout changes, and prepares claims
// by writing CDI specs that tell the container which simulated device it got.
//
// Registration with the kubelet, the DRA gRPC service and ResourceSlice
// publishing are done by k8s.io/dynamic-resource-allocation/kubeletplugin, which
// talks resource.k8s.io/v1 and falls back to v1beta2 and v1beta1 on older API
// servers (k8s.io/dynamic-resource-allocation/client).
//
// With --mode=device-plugin the same binary stands in for NVIDIA's device plugin
// instead: it hands out the simulated GPUs as the extended resource nvidia.com/gpu
// through the kubelet's device plugin API (internal/deviceplugin) and needs no API
// server.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/deviceplugin"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/driver"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/metrics"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// Modes of the binary (--mode).
const (
	modeDRA          = "dra"
	modeDevicePlugin = "device-plugin"
)

type options struct {
	mode          string
	nodeName      string
	stateFile     string
	cdiRoot       string
	claimsDir     string
	pluginDataDir string
	registrarDir  string
	kubeconfig    string
	cdiHookPath   string
	pollInterval  time.Duration
	metricsAddr   string
	dynamicMIG    bool
	driverRoot    string
	nvidiaSMI     string
	// device-plugin mode
	kubeletSocket string
	devicesDir    string
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envBool is true when the variable is "true" or "1".
func envBool(name string) bool {
	v := os.Getenv(name)
	return v == "true" || v == "1"
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("gpusim-kubelet-plugin", flag.ContinueOnError)
	klog.InitFlags(fs) // -v, --vmodule, ...
	o := &options{}
	fs.StringVar(&o.mode, "mode", envOr("GPUFLEET_GPUSIM_MODE", modeDRA),
		"what the plugin serves: \"dra\" (DRA driver gpu.nvidia.com) or \"device-plugin\" (extended resource nvidia.com/gpu, as NVIDIA's device plugin) [env GPUFLEET_GPUSIM_MODE]")
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"),
		"name of this node: pool name and node of the ResourceSlices; needed in mode dra [env NODE_NAME]")
	fs.StringVar(&o.stateFile, "state-file", envOr("GPUFLEET_GPUSIM_STATE", state.DefaultPath),
		"GPU simulator state file [env GPUFLEET_GPUSIM_STATE]")
	fs.StringVar(&o.cdiRoot, "cdi-root", envOr("CDI_ROOT", "/var/run/cdi"),
		"directory for the per-claim CDI spec files [env CDI_ROOT]")
	fs.StringVar(&o.claimsDir, "claims-dir", envOr("GPUFLEET_GPUSIM_CLAIMS_DIR", "/var/run/gpufleet-gpu-simulator/claims"),
		"host directory for the device files mounted into containers [env GPUFLEET_GPUSIM_CLAIMS_DIR]")
	fs.StringVar(&o.pluginDataDir, "plugin-data-dir", envOr("PLUGIN_DATA_DIR", "/var/lib/kubelet/plugins/"+devices.DriverName),
		"directory of the DRA gRPC socket and the checkpoint [env PLUGIN_DATA_DIR]")
	fs.StringVar(&o.registrarDir, "registrar-dir", envOr("REGISTRAR_DIR", kubeletplugin.KubeletRegistryDir),
		"directory the kubelet watches for plugin registration sockets [env REGISTRAR_DIR]")
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"kubeconfig file; empty means the in-cluster service account [env KUBECONFIG]")
	fs.StringVar(&o.cdiHookPath, "nvidia-cdi-hook-path", envOr("NVIDIA_CDI_HOOK_PATH", driver.DefaultNVIDIACDIHookPath),
		"the node's nvidia-cdi-hook, called by the CDI specs at container creation; the plugin does not start without it [env NVIDIA_CDI_HOOK_PATH]")
	fs.StringVar(&o.metricsAddr, "metrics-address", envOr("GPUFLEET_GPUSIM_METRICS_ADDRESS", ":9400"),
		"address of the simulated GPU metrics (DCGM exporter names) on /metrics; \"\" serves none [env GPUFLEET_GPUSIM_METRICS_ADDRESS]")
	fs.StringVar(&o.kubeletSocket, "kubelet-socket", envOr("KUBELET_SOCKET", pluginapi.KubeletSocket),
		"mode device-plugin: the kubelet's device plugin registration socket; the plugin's endpoint goes in its directory [env KUBELET_SOCKET]")
	fs.StringVar(&o.devicesDir, "devices-dir", envOr("GPUFLEET_GPUSIM_DEVICES_DIR", deviceplugin.DefaultDevicesDir),
		"mode device-plugin: host directory for the GPUs' device files mounted into containers [env GPUFLEET_GPUSIM_DEVICES_DIR]")
	fs.BoolVar(&o.dynamicMIG, "dynamic-mig", envBool("GPUFLEET_GPUSIM_DYNAMIC_MIG"),
		"mode dra: publish each MIG-capable GPU as partitionable devices (a CounterSet per GPU, the full GPU and every MIG profile at every placement consuming from it), as NVIDIA's driver does with its DynamicMIG feature gate; preparing a MIG device creates its GPU instance and compute instance through the simulator's nvidia-smi, unpreparing destroys them [env GPUFLEET_GPUSIM_DYNAMIC_MIG]")
	fs.StringVar(&o.driverRoot, "driver-root", envOr("NVIDIA_DRIVER_ROOT", "/"),
		"--dynamic-mig: the node's root filesystem as the plugin sees it (NVIDIA's driver root); the simulator's nvidia-smi runs chrooted there [env NVIDIA_DRIVER_ROOT]")
	fs.StringVar(&o.nvidiaSMI, "nvidia-smi-path", envOr("GPUFLEET_GPUSIM_NVIDIA_SMI", driver.DefaultNVIDIASMI),
		"--dynamic-mig: the simulator's nvidia-smi inside --driver-root [env GPUFLEET_GPUSIM_NVIDIA_SMI]")
	fs.DurationVar(&o.pollInterval, "poll-interval", 2*time.Second,
		"how often the state file (and in mode device-plugin the kubelet socket) is checked for changes")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch o.mode {
	case modeDRA:
		if o.nodeName == "" {
			return nil, errors.New("--node-name is empty: pass --node-name or set NODE_NAME (downward API spec.nodeName)")
		}
	case modeDevicePlugin:
		if o.kubeletSocket == "" {
			return nil, errors.New("--kubelet-socket is empty; the kubelet's is " + pluginapi.KubeletSocket)
		}
	default:
		return nil, fmt.Errorf("--mode=%q is not a mode; use %q or %q", o.mode, modeDRA, modeDevicePlugin)
	}
	if o.cdiHookPath == "" { // as the NVIDIA chart's nvidiaCDIHookPath: "" is the default
		o.cdiHookPath = driver.DefaultNVIDIACDIHookPath
	}
	if o.pollInterval < 100*time.Millisecond {
		return nil, fmt.Errorf("--poll-interval=%s is too short; use 100ms or more", o.pollInterval)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpusim-kubelet-plugin:", err)
		os.Exit(2)
	}
	if o.mode == modeDevicePlugin {
		err = runDevicePlugin(o)
	} else {
		err = run(o)
	}
	if err != nil {
		klog.ErrorS(err, "gpusim-kubelet-plugin stopped")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and not in a cluster (%w); in a pod with hostNetwork and no kube-proxy, set KUBERNETES_SERVICE_HOST/PORT to the API server", err)
	}
	return cfg, nil
}

func run(o *options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var fatal atomic.Pointer[error]
	logger := klog.FromContext(ctx)

	// Like the NVIDIA DRA kubelet plugin: no nvidia-cdi-hook, no start.
	if err := driver.CheckNVIDIACDIHook(o.cdiHookPath); err != nil {
		return err
	}
	// Like the NVIDIA DRA kubelet plugin: no driver loaded, no start (NVML init fails);
	// once started it holds the driver's device file open, keeping the module in use.
	started, release, err := startAsDriverClient(o.stateFile)
	if err != nil {
		return err
	}
	defer release()
	// Like the NVIDIA DRA kubelet plugin: a MIG layout it cannot enumerate stops it at
	// start, before it registers (the pod crash-loops until the layout is changed).
	if err := checkLayout(o.stateFile); err != nil {
		return err
	}

	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "gpusim-kubelet-plugin"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}

	for _, dir := range []string{o.pluginDataDir, o.registrarDir, o.cdiRoot, o.claimsDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}

	var mig driver.MIGManager
	if o.dynamicMIG {
		if err := driver.CheckNVIDIASMI(o.driverRoot, o.nvidiaSMI); err != nil {
			// Devices are published all the same; preparing a MIG device then fails.
			logger.Info("Warning: " + err.Error())
		}
		mig = &driver.SimulatorMIG{StatePath: o.stateFile, Root: o.driverRoot, NVIDIASMI: o.nvidiaSMI}
	}
	drv, err := driver.New(driver.Config{
		NodeName:          o.nodeName,
		CDIRoot:           o.cdiRoot,
		ClaimsDir:         o.claimsDir,
		CheckpointPath:    filepath.Join(o.pluginDataDir, "checkpoint.json"),
		NVIDIACDIHookPath: o.cdiHookPath,
		MIG:               mig,
	}, func(err error) {
		fatal.CompareAndSwap(nil, &err)
		cancel(err)
	})
	if err != nil {
		return err
	}

	helper, err := kubeletplugin.Start(ctx, drv,
		kubeletplugin.DriverName(devices.DriverName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(o.nodeName),
		kubeletplugin.PluginDataDirectoryPath(o.pluginDataDir),
		kubeletplugin.RegistrarDirectoryPath(o.registrarDir),
		kubeletplugin.HealthService(false),
	)
	if err != nil {
		return fmt.Errorf("start kubelet plugin helper: %w", err)
	}
	defer helper.Stop()
	logger.Info("Started", "driver", devices.DriverName, "node", o.nodeName, "stateFile", o.stateFile,
		"nvidiaCDIHook", o.cdiHookPath, "preparedClaims", len(drv.PreparedClaims()))

	if o.metricsAddr != "" {
		srv, err := serveMetrics(o.metricsAddr, o.stateFile, o.nodeName, drv.PreparedDevices)
		if err != nil {
			return err
		}
		defer srv.Close()
		logger.Info("Serving simulated GPU metrics", "address", o.metricsAddr, "path", "/metrics")
	}

	w := &watcher{path: o.stateFile, dynamicMIG: o.dynamicMIG, driverVersion: started}
	publish := func() {
		changed, infos, devs, err := w.poll()
		var unservable *devices.UnservableLayoutError
		var driverChanged *driverChangedError
		if errors.As(err, &unservable) || errors.As(err, &driverChanged) {
			// The NVIDIA plugin would fail at its next start on this layout, or has
			// GPUs read from another driver; stop now (the pod restarts).
			fatal.CompareAndSwap(nil, &err)
			cancel(err)
			return
		}
		if errors.Is(err, errDriverNotLoaded) {
			logger.Info("Warning: the NVIDIA driver is not loaded; keeping the devices published before", "reason", err.Error())
			return
		}
		if err != nil {
			logger.Error(err, "State file unusable; keeping the devices published before", "path", o.stateFile)
			return
		}
		if !changed {
			return
		}
		drv.SetDevices(infos)
		resources := poolResources(o.nodeName, devs)
		if w.result != nil && len(w.result.CounterSets) > 0 {
			resources = partitionablePoolResources(o.nodeName, w.result)
		}
		if err := helper.PublishResources(ctx, resources); err != nil {
			logger.Error(err, "Publishing ResourceSlices failed")
			return
		}
		logger.Info("Published devices", "pool", o.nodeName, "count", len(devs), "names", deviceNames(devs))
	}
	publish()
	ticker := time.NewTicker(o.pollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := fatal.Load(); err != nil {
				return *err
			}
			logger.Info("Shutting down", "cause", context.Cause(ctx))
			return nil
		case <-ticker.C:
			publish()
		}
	}
}

// runDevicePlugin is the device-plugin mode: the simulated GPUs as nvidia.com/gpu
// through the kubelet's device plugin API, until SIGINT or SIGTERM.
func runDevicePlugin(o *options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := klog.FromContext(ctx)

	// The CDI spec calls the hook as the DRA mode's specs do: no hook, no start.
	if err := driver.CheckNVIDIACDIHook(o.cdiHookPath); err != nil {
		return err
	}
	// NVIDIA's device plugin fails at start without a driver (NVML init, with its
	// default failOnInitError) and keeps NVML open while it runs.
	_, release, err := startAsDriverClient(o.stateFile)
	if err != nil {
		return err
	}
	defer release()
	for _, dir := range []string{o.cdiRoot, o.devicesDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	p, err := deviceplugin.New(deviceplugin.Config{
		KubeletSocket:     o.kubeletSocket,
		StateFile:         o.stateFile,
		CDIRoot:           o.cdiRoot,
		DevicesDir:        o.devicesDir,
		NVIDIACDIHookPath: o.cdiHookPath,
		PollInterval:      o.pollInterval,
	})
	if err != nil {
		return err
	}
	logger.Info("Started", "mode", modeDevicePlugin, "resource", deviceplugin.ResourceName,
		"kubeletSocket", o.kubeletSocket, "endpoint", p.Endpoint(), "stateFile", o.stateFile, "nvidiaCDIHook", o.cdiHookPath)

	if o.metricsAddr != "" {
		host := o.nodeName
		if host == "" {
			host, _ = os.Hostname()
		}
		// No claims in this mode: no device carries the dra_* labels.
		srv, err := serveMetrics(o.metricsAddr, o.stateFile, host, func() map[string]driver.ClaimRef { return nil })
		if err != nil {
			return err
		}
		defer srv.Close()
		logger.Info("Serving simulated GPU metrics", "address", o.metricsAddr, "path", "/metrics")
	}
	return p.Run(ctx)
}

// serveMetrics answers GET /metrics with the simulated GPU metrics of the state file
// as it is at that moment (metrics.Render); prepared gives the devices prepared for
// claims then.
func serveMetrics(addr, stateFile, nodeName string, prepared func() map[string]driver.ClaimRef) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-address=%s: %w; pick a free port or pass --metrics-address=\"\"", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(rw http.ResponseWriter, _ *http.Request) {
		s, _, err := state.Load(stateFile)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !s.DriverLoaded() { // nothing to read GPUs through
			http.Error(rw, errDriverNotLoaded.Error(), http.StatusServiceUnavailable)
			return
		}
		var buf bytes.Buffer
		if err := metrics.Render(&buf, s, nodeName, prepared()); err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		rw.Header().Set("Content-Type", metrics.ContentType)
		_, _ = rw.Write(buf.Bytes())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.Background().Error(err, "Metrics server stopped")
		}
	}()
	return srv, nil
}

// checkLayout returns the *devices.UnservableLayoutError of the state file's MIG
// layout, if it has one. A missing or unreadable state file is no reason to stop
// here: the watcher reports it and publishes what it can.
func checkLayout(path string) error {
	s, _, err := state.Load(path)
	if err != nil {
		return nil
	}
	if err := devices.CheckServable(s.GPUs); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// watcher remembers the last state file it turned into devices. A change of
// mtime or size makes it read the file; a change of the content's SHA-256 makes
// it rebuild the devices.
type watcher struct {
	path       string
	dynamicMIG bool // devices.BuildDynamic instead of devices.Build
	// driverVersion is the driver release the plugin started with ("": none known
	// yet; the first loaded state sets it); checkDriver compares each read with it.
	driverVersion string
	result        *devices.Result
	seen          bool
	mtime         time.Time
	size          int64
	missing       bool
	digest        [sha256.Size]byte
	// The last unusable version of the file, reported once.
	bad      bool
	badMtime time.Time
	badSize  int64
}

func (w *watcher) poll() (changed bool, infos map[string]devices.Info, devs []resourceapi.Device, err error) {
	fi, err := os.Stat(w.path)
	if errors.Is(err, os.ErrNotExist) {
		// No simulated GPU on this node (yet): publish an empty pool once.
		if w.seen && w.missing {
			return false, nil, nil, nil
		}
		klog.Background().Info("State file does not exist; publishing no devices", "path", w.path)
		w.seen, w.missing, w.result = true, true, nil
		return true, map[string]devices.Info{}, nil, nil
	}
	if err != nil {
		return false, nil, nil, err
	}
	if w.seen && !w.missing && fi.ModTime().Equal(w.mtime) && fi.Size() == w.size {
		return false, nil, nil, nil
	}
	if w.bad && fi.ModTime().Equal(w.badMtime) && fi.Size() == w.badSize {
		return false, nil, nil, nil // reported already
	}
	s, data, err := state.Load(w.path)
	if err == nil {
		err = checkDriver(w.path, w.driverVersion, s)
	}
	if err != nil {
		w.bad, w.badMtime, w.badSize = true, fi.ModTime(), fi.Size()
		return false, nil, nil, err
	}
	if w.driverVersion == "" {
		w.driverVersion = s.DriverVersion
	}
	digest := sha256.Sum256(data)
	if w.seen && !w.missing && digest == w.digest {
		w.mtime, w.size = fi.ModTime(), fi.Size()
		return false, nil, nil, nil
	}
	build := devices.Build
	if w.dynamicMIG {
		build = devices.BuildDynamic
	}
	res, err := build(s)
	if err != nil {
		w.bad, w.badMtime, w.badSize = true, fi.ModTime(), fi.Size()
		return false, nil, nil, fmt.Errorf("%s: %w", w.path, err)
	}
	w.bad = false
	for _, warning := range res.Warnings {
		klog.Background().Info("Warning: " + warning)
	}
	w.seen, w.missing, w.mtime, w.size, w.digest = true, false, fi.ModTime(), fi.Size(), digest
	w.result = res
	return true, res.Infos, res.Devices, nil
}

// poolResources puts the devices into one pool named after the node, in slices
// of at most resourceapi.ResourceSliceMaxDevices devices.
func poolResources(nodeName string, devs []resourceapi.Device) resourceslice.DriverResources {
	var slices []resourceslice.Slice
	for start := 0; start < len(devs); start += resourceapi.ResourceSliceMaxDevices {
		end := min(start+resourceapi.ResourceSliceMaxDevices, len(devs))
		slices = append(slices, resourceslice.Slice{Devices: devs[start:end]})
	}
	if len(slices) == 0 {
		slices = []resourceslice.Slice{{Devices: []resourceapi.Device{}}}
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: {Slices: slices}}}
}

// partitionablePoolResources is the dynamic MIG shape of NVIDIA's driver for
// Kubernetes 1.35 and later (cmd/gpu-kubelet-plugin/driver.go
// generateSplitResourceSlices): first the slices of the CounterSets (at most
// resourceapi.ResourceSliceMaxCounterSets each), then per GPU the slices of its
// devices (at most resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures each,
// as they consume counters).
func partitionablePoolResources(nodeName string, res *devices.Result) resourceslice.DriverResources {
	var slices []resourceslice.Slice
	sets := res.CounterSets
	for start := 0; start < len(sets); start += resourceapi.ResourceSliceMaxCounterSets {
		end := min(start+resourceapi.ResourceSliceMaxCounterSets, len(sets))
		slices = append(slices, resourceslice.Slice{SharedCounters: sets[start:end]})
	}
	for _, group := range res.DeviceGroups {
		for start := 0; start < len(group); start += resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures {
			end := min(start+resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures, len(group))
			slices = append(slices, resourceslice.Slice{Devices: group[start:end]})
		}
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: {Slices: slices}}}
}

func deviceNames(devs []resourceapi.Device) []string {
	names := make([]string, len(devs))
	for i, d := range devs {
		names[i] = d.Name
	}
	return names
}
