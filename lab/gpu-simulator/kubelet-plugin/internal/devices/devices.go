// Package devices turns the GPU simulator's state into DRA devices shaped like
// the ones the NVIDIA DRA driver (driver gpu.nvidia.com) publishes.
//
// The shape follows the NVIDIA DRA driver's kubelet plugin as read in its
// source (NVIDIA/k8s-dra-driver-gpu, now kubernetes-sigs/dra-driver-nvidia-gpu,
// releases v25.3 to v0.4: cmd/gpu-kubelet-plugin/deviceinfo.go GpuInfo.Attributes,
// mig.go CommonAttributesMig/CommonCapacitiesMig, partitions.go fullGpuCapacity,
// nvlib.go getGpuInfo; static MIG, name format of v25.12 and later) and as seen
// in a real capture of v0.4.1 on an H200
// (tests/unit/data/gpu/h200-single/resourceslice-nvidia-dra-driver-0.4.1.json):
//
//   - one device per GPU whose current MIG mode is not Enabled, named gpu-<minor>;
//   - one device per MIG device (compute instance) of a MIG-enabled GPU, named
//     gpu-<minor>-mig-<profile without dots>-<GI profile ID>-<placement start>;
//   - attributes type, uuid, productName, brand, architecture,
//     cudaComputeCapability/driverVersion/cudaDriverVersion (versions),
//     resource.kubernetes.io/pciBusID, addressingMode (only where the GPU reports
//     one, as NVIDIA publishes it only where NVML does), resource.kubernetes.io/pcieRoot
//     (only where the state names one, as NVIDIA publishes it only where sysfs
//     resolves it), and for MIG parentUUID and profile; a MIG device carries its
//     parent GPU's addressingMode, pciBusID and pcieRoot;
//   - capacity memory (bytes, BinarySI) and, for MIG, multiprocessors,
//     copyEngines, decoders, encoders, jpegEngines, ofaEngines and one
//     memorySlice<N>=1 per occupied memory slice.
//
// Layouts the NVIDIA plugin cannot serve make Build fail with an
// *UnservableLayoutError (see CheckServable).
package devices

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// DriverName is the DRA driver name of the NVIDIA DRA driver, which the
// simulator stands in for.
const DriverName = "gpu.nvidia.com"

// Device types (attribute "type").
const (
	TypeGPU = "gpu"
	TypeMIG = "mig"
)

// Info is what the plugin needs to know about a published device when it
// prepares a claim for it (the CDI spec and the file shown to the container).
type Info struct {
	Name        string `json:"name"`                 // device name in the ResourceSlice
	Type        string `json:"type"`                 // "gpu" or "mig"
	UUID        string `json:"uuid"`                 // GPU-... or MIG-...
	ParentUUID  string `json:"parentUUID,omitempty"` // MIG only
	Profile     string `json:"profile,omitempty"`    // MIG only, e.g. "1g.18gb"
	GPUMinor    int    `json:"gpuMinor"`
	GPUIndex    int    `json:"gpuIndex"`
	ProductName string `json:"productName"`
	PCIBusID    string `json:"pciBusID"` // BDF, e.g. "0000:19:00.0"
	MemoryMiB   int64  `json:"memoryMiB"`
	// Why the plugin refuses to prepare this device ("" = it prepares it): set for
	// a full GPU of dynamic MIG mode that holds GPU instances.
	PrepareError string `json:"prepareError,omitempty"`
	// DynamicMIG is set on the MIG devices of dynamic MIG mode: the GPU instance
	// that preparing creates (UUID is then the MIG device's, once created).
	DynamicMIG *DynamicMIG `json:"dynamicMIG,omitempty"`
}

// DynamicMIG is the GPU instance of a dynamic MIG device: GI profile ID and
// placement (in memory slices, as nvidia-smi mig -lgipp prints it).
type DynamicMIG struct {
	GIProfileID    int `json:"giProfileID"`
	PlacementStart int `json:"placementStart"`
	PlacementSize  int `json:"placementSize"`
}

// Result is the outcome of Build: the devices in publishing order, the same
// devices described for preparing, and warnings about the state (for logs).
//
// In dynamic MIG mode (BuildDynamic) CounterSets holds one CounterSet per
// partitionable GPU and DeviceGroups the devices per GPU, each group published
// in its own ResourceSlice; both are empty otherwise.
type Result struct {
	Devices      []resourceapi.Device
	Infos        map[string]Info
	Warnings     []string
	CounterSets  []resourceapi.CounterSet
	DeviceGroups [][]resourceapi.Device
}

// Build computes the devices of a node from the simulator state.
//
// Errors: a version or PCI bus ID that cannot be converted (the message names
// the GPU and the value), or two devices with the same name.
func Build(s *state.State) (*Result, error) {
	driverVersion, err := SemverFromNVIDIA(s.DriverVersion)
	if err != nil {
		return nil, fmt.Errorf("driver_version: %w", err)
	}
	cudaDriverVersion, err := SemverFromNVIDIA(s.CUDAVersion)
	if err != nil {
		return nil, fmt.Errorf("cuda_version: %w", err)
	}

	gpus := append([]state.GPU(nil), s.GPUs...)
	sort.SliceStable(gpus, func(i, j int) bool { return gpus[i].Minor < gpus[j].Minor })

	if err := CheckServable(gpus); err != nil {
		return nil, err
	}

	res := &Result{Infos: map[string]Info{}}
	for _, g := range gpus {
		bdf, common, err := gpuCommon(g, driverVersion, cudaDriverVersion)
		if err != nil {
			return nil, err
		}

		if !g.MIGEnabled() {
			attrs := common()
			attrs["type"] = str(TypeGPU)
			attrs["uuid"] = str(g.UUID)
			dev := resourceapi.Device{
				Name:       GPUDeviceName(g.Minor),
				Attributes: attrs,
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
					"memory": mib(g.MemoryMiB),
				},
			}
			if err := res.add(dev, Info{
				Name: dev.Name, Type: TypeGPU, UUID: g.UUID, GPUMinor: g.Minor, GPUIndex: g.Index,
				ProductName: g.Name, PCIBusID: bdf, MemoryMiB: g.MemoryMiB,
			}); err != nil {
				return nil, err
			}
			continue
		}

		gis := append([]state.GPUInstance(nil), g.GPUInstances...)
		sort.SliceStable(gis, func(i, j int) bool { return gis[i].PlacementStart < gis[j].PlacementStart })
		migDevices := 0
		for _, gi := range gis {
			cis := append([]state.ComputeInstance(nil), gi.ComputeInstances...)
			sort.SliceStable(cis, func(i, j int) bool { return cis[i].ID < cis[j].ID })
			names := migNames(g.Minor, gi, cis)
			for k, ci := range cis {
				profile := ci.Profile
				if profile == "" {
					profile = gi.Profile
				}
				attrs := common()
				attrs["type"] = str(TypeMIG)
				attrs["uuid"] = str(ci.UUID)
				attrs["parentUUID"] = str(g.UUID)
				attrs["profile"] = str(profile)
				capacity := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
					"multiprocessors": count(gi.Multiprocessors),
					"copyEngines":     count(gi.CopyEngines),
					"decoders":        count(gi.Decoders),
					"encoders":        count(gi.Encoders),
					"jpegEngines":     count(gi.JPEGEngines),
					"ofaEngines":      count(gi.OFAEngines),
					"memory":          mib(gi.MemoryMiB),
				}
				for slice := gi.PlacementStart; slice < gi.PlacementStart+gi.PlacementSize; slice++ {
					capacity[resourceapi.QualifiedName(fmt.Sprintf("memorySlice%d", slice))] = count(1)
				}
				dev := resourceapi.Device{Name: names[k], Attributes: attrs, Capacity: capacity}
				if err := res.add(dev, Info{
					Name: dev.Name, Type: TypeMIG, UUID: ci.UUID, ParentUUID: g.UUID, Profile: profile,
					GPUMinor: g.Minor, GPUIndex: g.Index, ProductName: g.Name, PCIBusID: bdf,
					MemoryMiB: gi.MemoryMiB,
				}); err != nil {
					return nil, err
				}
				migDevices++
			}
		}
		if migDevices == 0 {
			// Same condition the NVIDIA driver warns about; the GPU then has no device.
			res.Warnings = append(res.Warnings, fmt.Sprintf(
				"GPU %d (%s): MIG mode enabled but no MIG devices configured; it publishes no device", g.Index, g.UUID))
		}
	}
	return res, nil
}

// UnservableLayoutError is a MIG layout that the NVIDIA DRA kubelet plugin
// cannot enumerate: a compute instance that spans fewer compute slices than its
// GPU instance (CI profile 1c.3g.71gb in GI 3g.71gb). The NVIDIA plugin builds
// its list of MIG profiles only from CI profiles whose slice count equals the
// GI's (nvlib.go getGpuInfo: profiles with G != C are skipped), finds no
// profile for such a MIG device (getMigDevices: "error getting profile info for
// MIG device"), fails its device enumeration and exits at start; every release
// from v25.3 to v0.4 does so, and the DaemonSet's pod crash-loops.
type UnservableLayoutError struct {
	GPUIndex  int
	GPUUUID   string
	GIID      int
	GIProfile string
	CIID      int
	CIProfile string
	CIUUID    string
}

func (e *UnservableLayoutError) Error() string {
	return fmt.Sprintf("GPU %d (%s): MIG device %s is compute instance %d with CI profile %s inside "+
		"GPU instance %d with GI profile %s; it spans fewer compute slices than its GPU instance, and "+
		"NVIDIA's DRA kubelet plugin publishes only compute instances that span their whole GPU "+
		"instance (it fails at start with \"error getting profile info for MIG device\"); "+
		"destroy the compute instances of GPU instance %d and create one full-size compute instance "+
		"(nvidia-smi mig -gi %d -cci)",
		e.GPUIndex, e.GPUUUID, e.CIUUID, e.CIID, e.CIProfile, e.GIID, e.GIProfile, e.GIID, e.GIID)
}

// ciProfileRe is a compute-instance profile narrower than its GPU instance as
// nvidia-smi names it: <CI slices>c.<GI slices>g.<memory>gb[...].
var ciProfileRe = regexp.MustCompile(`^(\d+)c\.(\d+)g\.`)

// ComputeSlices returns the compute slices of a compute instance with CI
// profile ciProfile inside a GPU instance with GI profile giProfile: the "Nc."
// count of a "1c.3g.71gb" form, else the "Ng" of the GI profile (a compute
// instance named like its GPU instance spans all of it). ok is false when
// neither name starts with a slice count.
func ComputeSlices(ciProfile, giProfile string) (ci, gi int, ok bool) {
	giSlices, err := strconv.Atoi(strings.SplitN(giProfile, "g.", 2)[0])
	if err != nil {
		return 0, 0, false
	}
	if m := ciProfileRe.FindStringSubmatch(ciProfile); m != nil {
		c, _ := strconv.Atoi(m[1])
		return c, giSlices, true
	}
	return giSlices, giSlices, true
}

// CheckServable returns an *UnservableLayoutError for the first compute
// instance (GPUs in the given order, GPU instances by placement, compute
// instances by ID) that spans fewer compute slices than its GPU instance, on
// a GPU whose current MIG mode is Enabled; nil when the NVIDIA plugin could
// enumerate every MIG device.
func CheckServable(gpus []state.GPU) error {
	for _, g := range gpus {
		if !g.MIGEnabled() {
			continue
		}
		gis := append([]state.GPUInstance(nil), g.GPUInstances...)
		sort.SliceStable(gis, func(i, j int) bool { return gis[i].PlacementStart < gis[j].PlacementStart })
		for _, gi := range gis {
			cis := append([]state.ComputeInstance(nil), gi.ComputeInstances...)
			sort.SliceStable(cis, func(i, j int) bool { return cis[i].ID < cis[j].ID })
			for _, ci := range cis {
				c, total, ok := ComputeSlices(ci.Profile, gi.Profile)
				if ok && c < total {
					return &UnservableLayoutError{
						GPUIndex: g.Index, GPUUUID: g.UUID, GIID: gi.ID, GIProfile: gi.Profile,
						CIID: ci.ID, CIProfile: ci.Profile, CIUUID: ci.UUID,
					}
				}
			}
		}
	}
	return nil
}

// gpuCommon reads what every device of GPU g shares: its PCI address (BDF form) and a
// constructor of the attributes common to the GPU and its MIG devices. The error names the
// GPU and the field of the state file it could not read.
func gpuCommon(g state.GPU, driverVersion, cudaDriverVersion string) (string, func() map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, error) {
	cc, err := SemverFromNVIDIA(g.ComputeCapability)
	if err != nil {
		return "", nil, fmt.Errorf("gpu %d compute_capability: %w", g.Index, err)
	}
	bdf, err := PCIBusIDToBDF(g.PCIBusID)
	if err != nil {
		return "", nil, fmt.Errorf("gpu %d pci_bus_id: %w", g.Index, err)
	}
	return bdf, func() map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
		return commonAttributes(g, cc, driverVersion, cudaDriverVersion, bdf)
	}, nil
}

// commonAttributes are the attributes every device of GPU g carries (full GPU
// and MIG): cc, driverVersion and cudaDriverVersion are semantic versions, bdf
// the GPU's PCI bus ID in BDF form.
func commonAttributes(g state.GPU, cc, driverVersion, cudaDriverVersion, bdf string) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"productName":           str(g.Name),
		"brand":                 str(g.Brand),
		"architecture":          str(g.Architecture),
		"cudaComputeCapability": version(cc),
		"driverVersion":         version(driverVersion),
		"cudaDriverVersion":     version(cudaDriverVersion),
		deviceattribute.StandardDeviceAttributePCIBusID: str(bdf),
	}
	if g.AddressingMode != "" {
		attrs["addressingMode"] = str(g.AddressingMode)
	}
	if g.PCIeRoot != "" {
		attrs[deviceattribute.StandardDeviceAttributePCIeRoot] = str(g.PCIeRoot)
	}
	return attrs
}

func (r *Result) add(dev resourceapi.Device, info Info) error {
	if _, dup := r.Infos[dev.Name]; dup {
		return fmt.Errorf("device name %q occurs twice; check minors and placements in the state file", dev.Name)
	}
	r.Devices = append(r.Devices, dev)
	r.Infos[dev.Name] = info
	return nil
}

// GPUDeviceName is the name of a full GPU: gpu-<minor> (NVML minor, not index).
func GPUDeviceName(minor int) string { return fmt.Sprintf("gpu-%d", minor) }

// MIGDeviceName is the v25.12+ canonical MIG device name:
// gpu-<parent minor>-mig-<profile without dots>-<GI profile ID>-<placement start>.
func MIGDeviceName(parentMinor int, profile string, giProfileID, placementStart int) string {
	pname := toRFC1123Compliant(strings.ReplaceAll(profile, ".", ""))
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", parentMinor, pname, giProfileID, placementStart)
}

// migNames names the MIG devices of one GPU instance. The canonical name does not
// include the compute instance, so two compute instances of the same profile in
// one GPU instance would share it; those (and only those) get a "-ci<ID>" suffix.
// With one compute instance per GPU instance (what the NVIDIA driver supports)
// every name is the canonical one.
func migNames(minor int, gi state.GPUInstance, cis []state.ComputeInstance) []string {
	base := make([]string, len(cis))
	seen := map[string]int{}
	for i, ci := range cis {
		profile := ci.Profile
		if profile == "" {
			profile = gi.Profile
		}
		base[i] = MIGDeviceName(minor, profile, gi.ProfileID, gi.PlacementStart)
		seen[base[i]]++
	}
	out := make([]string, len(cis))
	for i, ci := range cis {
		out[i] = base[i]
		if seen[base[i]] > 1 {
			out[i] = fmt.Sprintf("%s-ci%d", base[i], ci.ID)
		}
	}
	return out
}

// MIGDeviceNames names the MIG devices of one GPU instance, one per compute
// instance, as the published devices are named.
func MIGDeviceNames(minor int, gi state.GPUInstance) []string {
	return migNames(minor, gi, gi.ComputeInstances)
}

// toRFC1123Compliant mirrors the NVIDIA driver's helper of the same name
// (cmd/gpu-kubelet-plugin/mig.go): lower case, anything but [a-z0-9-.] becomes
// "-", leading/trailing "-" trimmed. "1g.18gb+me" without dots -> "1g18gb-me".
func toRFC1123Compliant(name string) string {
	name = strings.ToLower(name)
	name = nonRFC1123.ReplaceAllString(name, "-")
	name = strings.Trim(name, "-")
	name = strings.TrimSuffix(name, ".")
	if len(name) > 253 {
		name = name[:253]
	}
	return name
}

var nonRFC1123 = regexp.MustCompile(`[^a-z0-9-.]`)

// SemverFromNVIDIA turns an NVIDIA version string into the semantic version the
// NVIDIA driver publishes: "580.159.04" -> "580.159.4" (leading zeros dropped),
// "9.0" -> "9.0.0", "13.0" -> "13.0.0".
func SemverFromNVIDIA(v string) (string, error) {
	parts := strings.Split(strings.TrimSpace(v), ".")
	if len(parts) < 1 || len(parts) > 3 || parts[0] == "" {
		return "", fmt.Errorf("%q is not a version of 1 to 3 numeric parts (e.g. \"580.159.04\")", v)
	}
	nums := make([]string, 3)
	for i := range nums {
		nums[i] = "0"
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return "", fmt.Errorf("%q is not a version of numeric parts (e.g. \"580.159.04\")", v)
		}
		nums[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(nums, "."), nil
}

var nvidiaBusID = regexp.MustCompile(`^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$`)

// PCIBusIDToBDF turns NVML's bus ID ("00000000:19:00.0", domain of 8 hex
// digits) into the extended BDF form of resource.kubernetes.io/pciBusID
// ("0000:19:00.0", lower case), as go-nvlib's GetPCIBusID does.
func PCIBusIDToBDF(id string) (string, error) {
	m := nvidiaBusID.FindStringSubmatch(strings.TrimSpace(id))
	if m == nil {
		return "", fmt.Errorf("%q is not a PCI bus ID like \"00000000:19:00.0\"", id)
	}
	domain := m[1][len(m[1])-4:]
	if strings.Trim(m[1][:len(m[1])-4], "0") != "" {
		return "", fmt.Errorf("%q has a PCI domain wider than 16 bits", id)
	}
	return strings.ToLower(fmt.Sprintf("%s:%s:%s.%s", domain, m[2], m[3], m[4])), nil
}

func str(s string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{StringValue: &s}
}

func version(v string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{VersionValue: &v}
}

func count(n int64) resourceapi.DeviceCapacity {
	return resourceapi.DeviceCapacity{Value: *resource.NewQuantity(n, resource.BinarySI)}
}

func mib(n int64) resourceapi.DeviceCapacity {
	return resourceapi.DeviceCapacity{Value: *resource.NewQuantity(n*1024*1024, resource.BinarySI)}
}
