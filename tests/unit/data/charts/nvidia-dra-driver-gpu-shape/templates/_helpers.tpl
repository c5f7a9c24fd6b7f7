{{/* Object name prefix: the release name, followed by the chart name (or nameOverride)
unless the release name already contains it. */}}
{{- define "shape.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $base := default .Chart.Name .Values.nameOverride -}}
{{- if contains $base .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $base | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "shape.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* resource.k8s.io version: the value, else the newest the cluster serves. */}}
{{- define "shape.resourceApi" -}}
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

{{/* FEATURE_GATES as the driver reads it: Name=bool pairs, comma separated, sorted. */}}
{{- define "shape.featureGates" -}}
{{- $pairs := list -}}
{{- range $name, $on := .Values.featureGates -}}
{{- $pairs = append $pairs (printf "%s=%t" $name $on) -}}
{{- end -}}
{{- join "," (sortAlpha $pairs) -}}
{{- end -}}
