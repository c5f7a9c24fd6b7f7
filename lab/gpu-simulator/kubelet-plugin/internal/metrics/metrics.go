// Package metrics renders the GPU simulator's GPU metrics under the names and labels
// NVIDIA's DCGM exporter uses, so that the monitoring rules and `gpufleet report` read
// the simulator exactly as they read a real node.
//
// Per GPU (an entity per whole GPU; with MIG enabled one per MIG device, with the
// GPU instance labels the exporter adds for them):
//
//	DCGM_FI_DEV_GPU_UTIL           gauge, percent (whole GPUs only: NVML reports none
//	                               for a MIG device)
//	DCGM_FI_PROF_GR_ENGINE_ACTIVE  gauge, ratio 0-1
//	DCGM_FI_DEV_FB_USED            gauge, MiB: memory the GPU's processes hold
//	DCGM_FI_DEV_FB_FREE            gauge, MiB: the rest of the device's memory
//
// Labels as the exporter writes them: gpu (index), UUID (the GPU's), pci_bus_id,
// device (nvidia<minor>), modelName, Hostname; MIG devices add GPU_I_PROFILE and
// GPU_I_ID. With its Kubernetes DRA mapping on (chart value kubernetesDRA.enabled), a
// device prepared for a claim adds dra_claim_name, dra_claim_namespace,
// dra_driver_name, dra_pool_name, dra_device_name, and for MIG devices dra_mig_profile
// and dra_mig_device_uuid. The simulator knows claims, not pods, so the exporter's
// pod, namespace and container labels are left out.
//
// Values come from the simulator's state: utilization_percent of the GPU (set with
// `gpusim set --gpu N --utilization P`; its MIG devices report the same), memory used
// from the processes that hold the GPU (`gpusim hold`).
package metrics

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"gpufleet.invalid/gpusim-kubelet-plugin/internal/devices"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/driver"
	"gpufleet.invalid/gpusim-kubelet-plugin/internal/state"
)

// ContentType is the text exposition format version 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

type family struct {
	name, help string
}

var (
	gpuUtil     = family{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."}
	grEngine    = family{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."}
	fbUsed      = family{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."}
	fbFree      = family{"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."}
	familyOrder = []family{gpuUtil, grEngine, fbUsed, fbFree}
)

type label struct{ name, value string }

// escape writes a label value as the exposition format wants it.
var escape = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

type sample struct {
	labels []label
	value  float64
}

// Render writes the metrics of every device of s on host (the node name, the pool
// of its ResourceSlices) to w; prepared maps a device name to the claim it is
// prepared for (driver.PreparedDevices).
func Render(w io.Writer, s *state.State, host string, prepared map[string]driver.ClaimRef) error {
	out := map[string][]sample{}
	for _, g := range s.GPUs {
		used := int64(0)
		for _, p := range g.Processes {
			used += p.UsedMemoryMiB
		}
		base := []label{
			{"gpu", strconv.Itoa(g.Index)},
			{"UUID", g.UUID},
			{"pci_bus_id", g.PCIBusID},
			{"device", fmt.Sprintf("nvidia%d", g.Minor)},
			{"modelName", g.Name},
			{"Hostname", host},
		}
		util := float64(g.UtilizationPercent)
		if !g.MIGEnabled() {
			name := devices.GPUDeviceName(g.Minor)
			labels := append(append([]label{}, base...), draLabels(prepared, host, name, "", "")...)
			out[gpuUtil.name] = append(out[gpuUtil.name], sample{labels, util})
			out[grEngine.name] = append(out[grEngine.name], sample{labels, util / 100})
			out[fbUsed.name] = append(out[fbUsed.name], sample{labels, float64(used)})
			out[fbFree.name] = append(out[fbFree.name], sample{labels, float64(max(g.MemoryMiB-used, 0))})
			continue
		}
		for _, gi := range g.GPUInstances {
			names := devices.MIGDeviceNames(g.Minor, gi)
			for i, ci := range gi.ComputeInstances {
				labels := append(append([]label{}, base...),
					label{"GPU_I_PROFILE", gi.Profile}, label{"GPU_I_ID", strconv.Itoa(gi.ID)})
				labels = append(labels, draLabels(prepared, host, names[i], gi.Profile, ci.UUID)...)
				out[grEngine.name] = append(out[grEngine.name], sample{labels, util / 100})
				// the simulator's processes hold whole GPUs: a MIG device shows none
				out[fbUsed.name] = append(out[fbUsed.name], sample{labels, 0})
				out[fbFree.name] = append(out[fbFree.name], sample{labels, float64(gi.MemoryMiB)})
			}
		}
	}
	var b strings.Builder
	for _, f := range familyOrder {
		samples := out[f.name]
		if len(samples) == 0 {
			continue
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", f.name, f.help, f.name)
		sort.SliceStable(samples, func(i, j int) bool { return key(samples[i]) < key(samples[j]) })
		for _, smp := range samples {
			b.WriteString(f.name)
			b.WriteByte('{')
			for i, l := range smp.labels {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%s=\"%s\"", l.name, escape.Replace(l.value))
			}
			fmt.Fprintf(&b, "} %s\n", strconv.FormatFloat(smp.value, 'g', -1, 64))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func key(s sample) string {
	parts := make([]string, len(s.labels))
	for i, l := range s.labels {
		parts[i] = l.name + "=" + l.value
	}
	return strings.Join(parts, ",")
}

// draLabels are the exporter's DRA labels of a device prepared for a claim; none
// for a device no claim holds.
func draLabels(prepared map[string]driver.ClaimRef, pool, device, migProfile, migUUID string) []label {
	ref, ok := prepared[device]
	if !ok {
		return nil
	}
	labels := []label{
		{"dra_claim_name", ref.Name},
		{"dra_claim_namespace", ref.Namespace},
		{"dra_driver_name", devices.DriverName},
		{"dra_pool_name", pool},
		{"dra_device_name", device},
	}
	if migProfile != "" {
		labels = append(labels, label{"dra_mig_profile", migProfile}, label{"dra_mig_device_uuid", migUUID})
	}
	return labels
}
