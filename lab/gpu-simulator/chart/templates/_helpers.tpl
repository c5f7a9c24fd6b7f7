{{/*
Name of the chart's objects: <release>-<chart name> unless the release already
contains the chart name; nameOverride replaces the chart name.
*/}}
{{- define "gpusim.name" -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gpusim.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{ include "gpusim.selectorLabels" . }}
{{- end -}}

{{- define "gpusim.selectorLabels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: kubelet-plugin
{{- end -}}

{{- define "gpusim.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-kubeletplugin" (include "gpusim.name" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gpusim.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The resource.k8s.io version of the DeviceClasses, chosen as the NVIDIA chart does
(templates/_helpers.tpl, "resourceApiVersion"): .Values.resourceApiVersion if set,
else the newest the cluster serves of v1, v1beta2, v1beta1, else "".
*/}}
{{- define "gpusim.resourceApiVersion" -}}
{{- if .Values.resourceApiVersion -}}
{{- .Values.resourceApiVersion -}}
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1" -}}
resource.k8s.io/v1
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta2" -}}
resource.k8s.io/v1beta2
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta1" -}}
resource.k8s.io/v1beta1
{{- end -}}
{{- end -}}

{{/*
The release of NVIDIA's DRA driver chart this simulator stands in for
(.Values.simulator.nvidiaChartVersion, "v" prefix dropped; "" = the newest line).
*/}}
{{- define "gpusim.nvidiaChartVersion" -}}
{{- toString (.Values.simulator.nvidiaChartVersion | default "") | trimPrefix "v" -}}
{{- end -}}

{{/*
"true" when that release creates DeviceClass vfio.gpu.nvidia.com: NVIDIA's chart has
templates/deviceclass-vfio-gpu.yaml from 25.12.0 on (nvidia-dra-driver-gpu 25.12.x and
every dra-driver-nvidia-gpu release, 0.4.0 and later), not in 25.3.x and 25.8.x.
*/}}
{{- define "gpusim.vfioDeviceClass" -}}
{{- $v := include "gpusim.nvidiaChartVersion" . -}}
{{- if not $v -}}
true
{{- else if semverCompare ">=25.12.0-0" $v -}}
true
{{- else if semverCompare "<1.0.0-0" $v -}}
true
{{- end -}}
{{- end -}}

{{/*
"true" when the DaemonSet runs the DRA kubelet plugin (mode dra, the default), "false"
when it runs as a device plugin (mode device-plugin).
*/}}
{{- define "gpusim.draMode" -}}
{{- eq (.Values.mode | default "dra") "dra" -}}
{{- end -}}

{{/* "true" when the plugin publishes partitionable devices: dynamicMIG, or NVIDIA's own
key featureGates.DynamicMIG (what the dra_driver role sets for dra_driver_dynamic_mig). */}}
{{- define "gpusim.dynamicMIG" -}}
{{- $gates := .Values.featureGates | default dict -}}
{{- $nvidia := and (kindIs "map" $gates) (eq (toString (index $gates "DynamicMIG")) "true") -}}
{{- or (eq (toString .Values.dynamicMIG) "true") $nvidia -}}
{{- end -}}
