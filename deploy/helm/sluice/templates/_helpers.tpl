{{/* Names and labels, as helm create writes them. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sluice.fullname" -}}
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

{{- define "sluice.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ include "sluice.chart" . }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The server config file (ConfigMap data). Chart-owned keys first; extraConfig may not repeat them. */}}
{{- define "sluice.serverConfig" -}}
{{- $s := .Values.server }}
{{- range $key := list "grpc" "http" "model_repository" "log_level" "max_message_bytes" "drain_grace_seconds" "cost" }}
{{- if hasKey $s.extraConfig $key }}
{{- fail (printf "server.extraConfig.%s: set it through the chart's own server.* value instead" $key) }}
{{- end }}
{{- end }}
{{- range $section := list "grpc" "http" }}
{{- if hasKey (index $s $section) "address" }}
{{- fail (printf "server.%s.address: the chart sets it from server.%sPort" $section $section) }}
{{- end }}
{{- end }}
{{- $config := dict
  "grpc" (merge (dict "address" (printf "0.0.0.0:%d" (int $s.grpcPort))) $s.grpc)
  "http" (merge (dict "address" (printf "0.0.0.0:%d" (int $s.httpPort))) $s.http)
  "model_repository" .Values.modelRepository.mountPath
  "log_level" $s.logLevel
  "max_message_bytes" (int64 $s.maxMessageBytes)
  "drain_grace_seconds" $s.drainGraceSeconds }}
{{- if $s.cost }}
{{- $_ := set $config "cost" $s.cost }}
{{- end }}
{{- toYaml (merge $config $s.extraConfig) }}
{{- end }}

{{/* preStop sleep + drain grace + 10 s unless set; a set value must cover preStop + drain. */}}
{{- define "sluice.terminationGracePeriodSeconds" -}}
{{- $needed := add (int .Values.preStopSleepSeconds) (int (ceil .Values.server.drainGraceSeconds)) }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add $needed 10 }}
{{- else if lt (int .Values.terminationGracePeriodSeconds) (int $needed) }}
{{- fail (printf "terminationGracePeriodSeconds %d is below preStopSleepSeconds + server.drainGraceSeconds = %d: the kubelet would kill the server mid-drain" (int .Values.terminationGracePeriodSeconds) (int $needed)) }}
{{- else }}
{{- int .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}
