{{/* Chart name. */}}
{{- define "qas.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: every resource name starts with it; cluster-scoped names include the release. */}}
{{- define "qas.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 48 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 48 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 48 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "qas.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "qas.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component: (dict "ctx" $ "component" "decider"). */}}
{{- define "qas.selectorLabels" -}}
app.kubernetes.io/name: {{ include "qas.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "qas.componentLabels" -}}
{{ include "qas.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "qas.image" -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end }}

{{- define "qas.proxyImage" -}}
{{- printf "%s:%s" .Values.webhook.proxy.image.repository .Values.webhook.proxy.image.tag }}
{{- end }}

{{- define "qas.webhookService" -}}{{ include "qas.fullname" . }}-webhook{{- end }}
{{/* The webhook's certificate Secret: self-managed (Opaque, the webhook's own CA and
     certificate) or cert-manager's (kubernetes.io/tls). Two names, because a Secret's
     type cannot change: switching modes replaces one Secret by the other. */}}
{{- define "qas.webhookSecret" -}}
{{- if .Values.webhook.certManager.enabled -}}
{{ include "qas.fullname" . }}-webhook-cert
{{- else -}}
{{ include "qas.fullname" . }}-webhook-tls
{{- end }}
{{- end }}
{{- define "qas.webhookConfig" -}}{{ include "qas.fullname" . }}-inject{{- end }}
{{- define "qas.influxService" -}}{{ include "qas.fullname" . }}-influxdb{{- end }}
{{- define "qas.leaseName" -}}{{ default (printf "%s-decider" (include "qas.fullname" .)) .Values.decider.leaderElection.id }}{{- end }}

{{/* The InfluxDB URL the decider and collector use. */}}
{{- define "qas.influxURL" -}}
{{- if eq .Values.influxdb.mode "internal" -}}
http://{{ include "qas.influxService" . }}.{{ .Release.Namespace }}.svc:{{ .Values.influxdb.internal.port }}
{{- else -}}
{{ required "influxdb.external.url is required when influxdb.mode is external" .Values.influxdb.external.url }}
{{- end }}
{{- end }}

{{/* InfluxDB flags shared by the decider and collector. */}}
{{- define "qas.influxArgs" -}}
- --influx-url={{ include "qas.influxURL" . }}
- --influx-bucket={{ .Values.influxdb.bucket }}
{{- with .Values.influxdb.org }}
- --influx-org={{ . }}
{{- end }}
{{- end }}

{{/* The InfluxDB token, from a Secret, as the environment override of --influx-token:
     (dict "ctx" $ "prefix" "QAS_DECIDER"). Kept off the command line. */}}
{{- define "qas.influxTokenEnv" -}}
{{- if and (eq .ctx.Values.influxdb.mode "external") .ctx.Values.influxdb.external.tokenSecret.name }}
- name: {{ .prefix }}_INFLUX_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .ctx.Values.influxdb.external.tokenSecret.name }}
      key: {{ .ctx.Values.influxdb.external.tokenSecret.key }}
{{- end }}
{{- end }}

{{/* Scheduling of one component: (dict "ctx" $ "c" .Values.decider). */}}
{{- define "qas.scheduling" -}}
{{- with merge (dict) .c.nodeSelector .ctx.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with concat .ctx.Values.tolerations .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default .ctx.Values.affinity .c.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
