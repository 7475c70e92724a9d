{{/* Chart name. */}}
{{- define "kueue-doctor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the release name if it already contains the chart name, else <release>-<chart>. */}}
{{- define "kueue-doctor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kueue-doctor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable across upgrades (a Deployment's selector is immutable). */}}
{{- define "kueue-doctor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kueue-doctor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "kueue-doctor.labels" -}}
helm.sh/chart: {{ include "kueue-doctor.chart" . }}
{{ include "kueue-doctor.selectorLabels" . }}
app.kubernetes.io/version: {{ (default .Chart.AppVersion .Values.image.tag) | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kueue-doctor
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "kueue-doctor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kueue-doctor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kueue-doctor.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag | toString) }}
{{- end }}
{{- end }}

{{- define "kueue-doctor.metricsServiceName" -}}
{{- printf "%s-metrics" (include "kueue-doctor.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The leader-election Lease (one per namespace shard: set leaderElection.leaseName per release). */}}
{{- define "kueue-doctor.leaseName" -}}
{{- default (include "kueue-doctor.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}
