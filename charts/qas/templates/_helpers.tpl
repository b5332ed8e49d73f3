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

{{/* InfluxDB flags shared by the decider and collector, quoted: a bucket or
     organisation may hold what YAML would read otherwise (" #", ": "). */}}
{{- define "qas.influxArgs" -}}
- {{ printf "--influx-url=%s" (include "qas.influxURL" .) | quote }}
- {{ printf "--influx-bucket=%s" .Values.influxdb.bucket | quote }}
{{- with .Values.influxdb.org }}
- {{ printf "--influx-org=%s" . | quote }}
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

{{/* Durations. values.schema.json's goDuration admits the part of Go's duration syntax
     (time.ParseDuration) whose value a template can compute exactly: decimal numbers,
     each with a unit (h, m, s, ms, us or µs, ns) and a fraction no finer than a
     nanosecond. qas.durationNS prints such a duration in nanoseconds, as Go reads it,
     or "error: <why>" (anything else, or beyond Go's 2562047h47m16.854775807s);
     test/chart compares it with time.ParseDuration. Integer arithmetic throughout, so
     comparing two durations is exact. */}}
{{- define "qas.durationNS" -}}
{{- $s := toString . -}}
{{- $max := 9223372036854775807 -}}
{{- $units := dict "h" 3600000000000 "m" 60000000000 "s" 1000000000 "ms" 1000000 "us" 1000 "µs" 1000 "μs" 1000 "ns" 1 -}}
{{- $err := "" -}}
{{- $total := 0 -}}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]{1,11})?h|[0-9]+(\\.[0-9]{1,10})?m|[0-9]+(\\.[0-9]{1,9})?s|[0-9]+(\\.[0-9]{1,6})?ms|[0-9]+(\\.[0-9]{1,3})?(us|µs|μs)|[0-9]+ns)+$" $s) -}}
{{- $err = "not a duration such as 15s, 1m30s or 1.5h (units h, m, s, ms, us, ns; no fraction finer than a nanosecond)" -}}
{{- end -}}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h)" $s -1 -}}
{{- if not $err -}}
{{- $digits := regexFind "^[0-9]+" $part -}}
{{- $number := regexFind "^[0-9.]+" $part -}}
{{- $unit := index $units (trimPrefix $number $part) -}}
{{- $int := regexReplaceAll "^0+" $digits "" | default "0" -}}
{{- $frac := trimPrefix "." (trimPrefix $digits $number) -}}
{{- if or (gt (len $int) 19) (and (eq (len $int) 19) (gt $int "9223372036854775807")) (gt (atoi $int) (div $max $unit)) -}}
{{- $err = "out of range (Go durations end at 2562047h47m16.854775807s)" -}}
{{- else -}}
{{- $ns := mul (atoi $int) $unit -}}
{{- if $frac -}}
{{- $fracNS := mul (atoi $frac) (div $unit (atoi (printf "1%s" (repeat (len $frac) "0")))) -}}
{{- if gt $fracNS (sub $max $ns) -}}
{{- $err = "out of range (Go durations end at 2562047h47m16.854775807s)" -}}
{{- else -}}
{{- $ns = add $ns $fracNS -}}
{{- end -}}
{{- end -}}
{{- if and (not $err) (gt $ns (sub $max $total)) -}}
{{- $err = "out of range (Go durations end at 2562047h47m16.854775807s)" -}}
{{- else if not $err -}}
{{- $total = add $total $ns -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $err -}}error: {{ $err }}{{- else -}}{{ $total }}{{- end -}}
{{- end }}

{{/* qas.durationNS of (dict "name" "decider.interval" "value" ...), failing the
     render with a message naming the value when it is not a duration. */}}
{{- define "qas.requireDurationNS" -}}
{{- $ns := include "qas.durationNS" .value -}}
{{- if hasPrefix "error: " $ns -}}
{{- fail (printf "%s (%v) is %s" .name .value (trimPrefix "error: " $ns)) -}}
{{- end -}}
{{- $ns -}}
{{- end }}

{{/* Quantities. qas.quantity prints a Kubernetes quantity (a string such as 100m, 0.5,
     128Mi, 1e3, or a number; values.schema.json's quantity) as a float64 for
     comparing, or "error: <why>". The value is the float nearest the exact one: the
     number with its decimal suffix is parsed once (1.5G as 1.5e9), and a binary
     suffix multiplies by 1024 per step, which floats do exactly. So the order of two
     quantities is the order Kubernetes gives them unless they agree in their first 15
     or so digits. */}}
{{- define "qas.quantity" -}}
{{- $s := toString . -}}
{{- $decimal := dict "n" -9 "u" -6 "m" -3 "" 0 "k" 3 "M" 6 "G" 9 "T" 12 "P" 15 "E" 18 -}}
{{- $binary := dict "Ki" 1 "Mi" 2 "Gi" 3 "Ti" 4 "Pi" 5 "Ei" 6 -}}
{{- $number := regexFind "^\\+?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)" $s -}}
{{- $suffix := trimPrefix $number $s -}}
{{- $number = trimPrefix "+" $number -}}
{{- if not $number -}}
error: not a quantity such as 100m, 0.5, 128Mi or 1G
{{- else if hasKey $decimal $suffix -}}
{{- float64 (printf "%se%d" $number (index $decimal $suffix)) -}}
{{- else if hasKey $binary $suffix -}}
{{- $v := float64 $number -}}
{{- range until (index $binary $suffix) -}}
{{- $v = mulf $v 1024 -}}
{{- end -}}
{{- $v -}}
{{- else if regexMatch "^[eE][+-]?[0-9]{1,2}$" $suffix -}}
{{- float64 (printf "%se%d" $number (atoi (trimPrefix "+" (substr 1 -1 $suffix)))) -}}
{{- else -}}
error: not a quantity such as 100m, 0.5, 128Mi or 1G
{{- end -}}
{{- end }}

{{/* Requests must not exceed limits (the apiserver refuses such a container, and with
     the sidecar's resources every injected pod): (dict "name" "decider.resources"
     "value" .Values.decider.resources). */}}
{{- define "qas.checkResources" -}}
{{- $resources := default (dict) .value -}}
{{- $requests := default (dict) $resources.requests -}}
{{- $limits := default (dict) $resources.limits -}}
{{- range $resource, $request := $requests -}}
{{- if hasKey $limits $resource -}}
{{- $limit := index $limits $resource -}}
{{- $r := include "qas.quantity" $request -}}
{{- $l := include "qas.quantity" $limit -}}
{{- if or (hasPrefix "error: " $r) (hasPrefix "error: " $l) -}}
{{- fail (printf "%s.requests.%s (%v) and limits.%s (%v) must be quantities such as 100m, 0.5, 128Mi or 1G" $.name $resource $request $resource $limit) -}}
{{- end -}}
{{- if gt (float64 $r) (float64 $l) -}}
{{- fail (printf "%s.requests.%s (%v) must not exceed %s.limits.%s (%v)" $.name $resource $request $.name $resource $limit) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* InfluxQL's keywords (github.com/influxdata/influxql, token.go), which cannot be
     an unquoted identifier; test/chart checks each against a real InfluxDB 1.8. */}}
{{- define "qas.influxqlKeywords" -}}
all alter analyze and any as asc begin by cardinality continuous create database databases default delete desc destinations diagnostics distinct drop duration end every exact explain false field for from grant grants group groups in inf insert into key keys kill limit measurement measurements name offset on or order password policies policy privileges queries query read replication resample retention revoke select series set shard shards show slimit soffset stats subscription subscriptions tag to true user users values where with write
{{- end }}
