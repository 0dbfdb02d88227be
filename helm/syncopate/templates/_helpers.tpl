{{/* Names: <release>-syncopate unless overridden; 63 characters at most (DNS labels). */}}
{{- define "syncopate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "syncopate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "syncopate.coordinator" -}}{{ include "syncopate.fullname" . | trunc 51 }}-coordinator{{- end -}}
{{- define "syncopate.shard" -}}{{ include "syncopate.fullname" . | trunc 57 }}-shard{{- end -}}
{{- define "syncopate.worker" -}}{{ include "syncopate.fullname" . | trunc 56 }}-worker{{- end -}}
{{- define "syncopate.evaluator" -}}{{ include "syncopate.fullname" . | trunc 53 }}-evaluator{{- end -}}
{{- define "syncopate.jobConfigMap" -}}{{ include "syncopate.fullname" . | trunc 59 }}-job{{- end -}}
{{- define "syncopate.joinTokenSecret" -}}
{{- default (printf "%s-join-token" (include "syncopate.fullname" . | trunc 52)) .Values.joinToken.existingSecret -}}
{{- end -}}

{{- define "syncopate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "syncopate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The coordinator's address as every other component dials it. */}}
{{- define "syncopate.coordinatorAddress" -}}
{{ include "syncopate.coordinator" . }}:{{ .Values.coordinator.port }}
{{- end -}}

{{- define "syncopate.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "syncopate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "syncopate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "syncopate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "syncopate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: syncopate
{{- end -}}

{{/*
Flags every component passes for TLS and the join token. PLANNED flags: not in the binaries yet.
The join token comes from the environment ($(SYNCOPATE_JOIN_TOKEN), see syncopate.securityEnv).
*/}}
{{- define "syncopate.securityArgs" -}}
{{- if .Values.tls.enabled }}
- --tls_cert=/etc/syncopate/tls/tls.crt
- --tls_key=/etc/syncopate/tls/tls.key
- --tls_ca=/etc/syncopate/tls/ca.crt
{{- end }}
{{- if .Values.joinToken.enabled }}
- --join_token=$(SYNCOPATE_JOIN_TOKEN)
{{- end }}
{{- end -}}

{{- define "syncopate.securityEnv" -}}
{{- if .Values.joinToken.enabled }}
- name: SYNCOPATE_JOIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "syncopate.joinTokenSecret" . }}
      key: {{ .Values.joinToken.secretKey }}
{{- end }}
{{- end -}}

{{- define "syncopate.securityVolumeMounts" -}}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/syncopate/tls
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "syncopate.securityVolumes" -}}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ required "tls.secretName is required when tls.enabled" .Values.tls.secretName }}
{{- end }}
# readOnlyRootFilesystem: anything a library writes to /tmp goes here.
- name: tmp
  emptyDir: {}
{{- end -}}

{{/*
Probes. The coordinator and shards serve grpc.health.v1 (Kubernetes gRPC probes, 1.24+). With TLS
on, a plain gRPC probe cannot connect, so those use `syncopate health` (which will take the TLS
flags too) - PLANNED with the TLS flags.
*/}}
{{- define "syncopate.grpcProbes" -}}
{{- $root := index . 0 -}}
{{- $port := index . 1 -}}
{{- range $kind := list "livenessProbe" "readinessProbe" }}
{{ $kind }}:
  {{- if $root.Values.tls.enabled }}
  exec:
    command: [syncopate, health, "--address=127.0.0.1:{{ $port }}"]
  {{- else }}
  grpc:
    port: {{ $port }}
  {{- end }}
  initialDelaySeconds: {{ $root.Values.probes.initialDelaySeconds }}
  periodSeconds: {{ $root.Values.probes.periodSeconds }}
  timeoutSeconds: {{ $root.Values.probes.timeoutSeconds }}
  failureThreshold: {{ $root.Values.probes.failureThreshold }}
{{- end }}
{{- end -}}

{{- define "syncopate.httpProbes" -}}
{{- $root := index . 0 -}}
{{- range $kind := list "livenessProbe" "readinessProbe" }}
{{ $kind }}:
  httpGet:
    path: /metrics
    port: metrics
  initialDelaySeconds: {{ $root.Values.probes.initialDelaySeconds }}
  periodSeconds: {{ $root.Values.probes.periodSeconds }}
  timeoutSeconds: {{ $root.Values.probes.timeoutSeconds }}
  failureThreshold: {{ $root.Values.probes.failureThreshold }}
{{- end }}
{{- end -}}

{{/* Scheduling and pod-level settings shared by every pod template; argument: (list $ .Values.X). */}}
{{- define "syncopate.podSpecCommon" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
serviceAccountName: {{ include "syncopate.serviceAccountName" $root }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
