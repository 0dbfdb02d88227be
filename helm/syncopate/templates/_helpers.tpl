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
{{- define "syncopate.sharedCheckpoints" -}}{{ include "syncopate.fullname" . | trunc 51 }}-checkpoints{{- end -}}
{{- define "syncopate.shard" -}}{{ include "syncopate.fullname" . | trunc 53 }}-shard{{- end -}}
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

{{/*
The image of the pods that run the job's model (coordinator, workers, evaluator): the torch image
for a PyTorch model (values `torch`), else the one image.
*/}}
{{- define "syncopate.modelImage" -}}
{{- if .Values.torch.enabled -}}
{{ .Values.torch.image.repository }}:{{ default .Chart.AppVersion .Values.torch.image.tag }}
{{- else -}}
{{ include "syncopate.image" . }}
{{- end -}}
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

{{/* The name in the TLS certificate that every component presents and checks (--tls_server_name). */}}
{{- define "syncopate.tlsServerName" -}}
{{- default (include "syncopate.fullname" .) .Values.tls.serverName -}}
{{- end -}}

{{/*
Flags every component passes for mTLS and the join token. Secrets are files mounted from Secrets
(syncopate.securityVolumes): nothing secret is ever on a command line or in the environment.
*/}}
{{- define "syncopate.securityArgs" -}}
{{- if .Values.tls.enabled }}
- --tls_cert=/etc/syncopate/tls/tls.crt
- --tls_key=/etc/syncopate/tls/tls.key
- --tls_ca=/etc/syncopate/tls/ca.crt
- --tls_server_name={{ include "syncopate.tlsServerName" . }}
{{- end }}
{{- if .Values.joinToken.enabled }}
- --join_token_file=/etc/syncopate/join-token/token
{{- end }}
{{- end -}}

{{- define "syncopate.securityVolumeMounts" -}}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/syncopate/tls
  readOnly: true
{{- end }}
{{- if .Values.joinToken.enabled }}
- name: join-token
  mountPath: /etc/syncopate/join-token
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Secret files are 0440: readable by the pods' fsGroup (10001), not by other users. */}}
{{- define "syncopate.securityVolumes" -}}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ required "tls.secretName is required when tls.enabled" .Values.tls.secretName }}
    defaultMode: 288  # 0440 in octal (decimal: YAML 1.1 and 1.2 parsers disagree on 0440)
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
      - {key: ca.crt, path: ca.crt}
{{- end }}
{{- if .Values.joinToken.enabled }}
- name: join-token
  secret:
    secretName: {{ include "syncopate.joinTokenSecret" . }}
    defaultMode: 288  # 0440 in octal (decimal: YAML 1.1 and 1.2 parsers disagree on 0440)
    items:
      - key: {{ .Values.joinToken.secretKey }}
        path: token
{{- end }}
# readOnlyRootFilesystem: anything a library writes to /tmp goes here.
- name: tmp
  emptyDir: {}
{{- end -}}

{{/*
The TLS flags `syncopate health` and `syncopate status` need inside a pod, as one line.
*/}}
{{- define "syncopate.cliTlsFlags" -}}
{{- if .Values.tls.enabled -}}
--tls_cert=/etc/syncopate/tls/tls.crt --tls_key=/etc/syncopate/tls/tls.key --tls_ca=/etc/syncopate/tls/ca.crt --tls_server_name={{ include "syncopate.tlsServerName" . }}
{{- end -}}
{{- end -}}

{{/*
Probes of the coordinator and shards (grpc.health.v1). Kubernetes' native gRPC probe exists from
1.24 and cannot present a client certificate; otherwise (older clusters, or TLS on) the probe runs
`syncopate health` inside the container with the same certificate flags.
*/}}
{{- define "syncopate.grpcProbes" -}}
{{- $root := index . 0 -}}
{{- $port := index . 1 -}}
{{- range $kind := list "livenessProbe" "readinessProbe" }}
{{ $kind }}:
  {{- if or $root.Values.tls.enabled (not (semverCompare ">=1.24-0" $root.Capabilities.KubeVersion.Version)) }}
  exec:
    command:
      - syncopate
      - health
      - --address=127.0.0.1:{{ $port }}
      {{- if $root.Values.tls.enabled }}
      - --tls_cert=/etc/syncopate/tls/tls.crt
      - --tls_key=/etc/syncopate/tls/tls.key
      - --tls_ca=/etc/syncopate/tls/ca.crt
      - --tls_server_name={{ include "syncopate.tlsServerName" $root }}
      {{- end }}
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

{{/*
Data beyond the image (values `data`): the volume at /var/lib/syncopate/data, its mount, and the
init container that generates click data into it; and a PyTorch model's files (values `torch`) at
/var/lib/syncopate/model. For the pods that read data and run the model: coordinator (it counts
the training examples, and builds a PyTorch module once), workers, evaluator.
*/}}
{{- define "syncopate.dataEnabled" -}}
{{- if or .Values.data.generateCtr.enabled .Values.data.volume }}true{{ end -}}
{{- end -}}

{{- define "syncopate.dataVolumeMounts" -}}
{{- if include "syncopate.dataEnabled" . }}
- name: data
  mountPath: /var/lib/syncopate/data
  readOnly: true
{{- end }}
{{- if and .Values.torch.enabled .Values.torch.moduleVolume }}
- name: model
  mountPath: /var/lib/syncopate/model
  readOnly: true
{{- end }}
{{- end -}}

{{- define "syncopate.dataVolumes" -}}
{{- if .Values.data.generateCtr.enabled }}
- name: data
  emptyDir: {}
{{- else if .Values.data.volume }}
- name: data
  {{- toYaml .Values.data.volume | nindent 2 }}
{{- end }}
{{- if and .Values.torch.enabled .Values.torch.moduleVolume }}
- name: model
  {{- toYaml .Values.torch.moduleVolume | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "syncopate.dataInitContainers" -}}
{{- if .Values.data.generateCtr.enabled }}
initContainers:
  # The same planted teacher and seeds in every pod, hence the same files (syncopate datagen ctr).
  - name: generate-ctr-data
    image: {{ include "syncopate.image" . }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    command:
      - /bin/sh
      - -c
      - >-
        mkdir -p data/ctr
        && syncopate datagen ctr --rows={{ .Values.data.generateCtr.trainRows }} --seed=1 --out=data/ctr/train.tsv.gz
        && syncopate datagen ctr --rows={{ .Values.data.generateCtr.testRows }} --seed=2 --out=data/ctr/test.tsv.gz
    resources:
      requests: {cpu: 500m, memory: 128Mi}
      limits: {memory: 512Mi}
    securityContext:
      {{- toYaml .Values.securityContext | nindent 6 }}
    volumeMounts:
      - name: data
        mountPath: /var/lib/syncopate/data
      - name: tmp
        mountPath: /tmp
{{- end }}
{{- end -}}

{{/*
Limits shared by every Job of the release; argument: (list $ COMPONENT), COMPONENT also being the
name of the Job's container. With restartPolicy OnFailure, container restarts count against
backoffLimit; past it (or past activeDeadlineSeconds) the Job is marked Failed and its running
pods are stopped: a failed training job is visible as failed. Under a podFailurePolicy
(syncopate.podFailurePolicyOn) each failed pod counts instead, except those the rules decide.
*/}}
{{- define "syncopate.jobLimits" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
backoffLimit: {{ $root.Values.job.backoffLimit }}
{{- with $root.Values.job.activeDeadlineSeconds }}
activeDeadlineSeconds: {{ . }}
{{- end }}
{{- if include "syncopate.podFailurePolicyOn" . }}
{{- $codes := $root.Values.podFailurePolicy.failJobExitCodes }}
{{- $previous := 0 }}
{{- range $codes }}
{{- if le (int .) $previous }}
{{- fail "podFailurePolicy.failJobExitCodes must be in ascending order without repeats (the Job API refuses others)" }}
{{- end }}
{{- $previous = int . }}
{{- end }}
podFailurePolicy:
  rules:
    # First match decides. A pod ended by a disruption (preemption, eviction by a drain, a node's
    # taint) never counts: Kubernetes replaces it, and the job carries on (leases re-issued).
    - action: Ignore
      onPodConditions:
        - type: DisruptionTarget
          status: "True"
    {{- if eq $component "shard" }}
    # A shard superseded by its replacement (exit 4: its node was lost, and it came back after
    # the replacement claimed its checkpoint directory) is not a failure of the job.
    - action: Ignore
      onExitCodes:
        containerName: shard
        operator: In
        values: [4]
    {{- end }}
    {{- if eq $component "worker" }}
    # A worker stopped by SIGTERM before the job ended (exit 143: a scale-down of parallelism,
    # which deletes pods without a DisruptionTarget condition) is not a failure: the coordinator
    # re-issues its leases. (The chart sets no liveness probe, so no kubelet restart ends here.)
    - action: Ignore
      onExitCodes:
        containerName: worker
        operator: In
        values: [143]
    {{- end }}
    # The process cannot succeed (the exit codes in docs/operations.md, "Running a cluster by
    # hand"; by default 2 = a start-up check failed, 3 = a permanent refusal): another pod cannot
    # do better, so the Job fails now instead of after backoffLimit pods. Exit 1 (joins or rejoins ran out, a port not bound)
    # and crashes (signals, OOM kills) count against backoffLimit.
    - action: FailJob
      onExitCodes:
        containerName: {{ $component }}
        operator: In
        values: [{{ join ", " $codes }}]
{{- end }}
{{- end -}}

{{/*
Whether a component's Job runs under a podFailurePolicy; argument: (list $ COMPONENT). Only with
podFailurePolicy.enabled, on Kubernetes 1.26+ (where the feature and the DisruptionTarget
condition are on by default; beta, GA in 1.31), and never for the coordinator: its progress file
is in an emptyDir, which only a restart in place keeps, and the policy needs restartPolicy Never
(every failure a new pod).
*/}}
{{- define "syncopate.podFailurePolicyOn" -}}
{{- $root := index . 0 -}}
{{- if and $root.Values.podFailurePolicy.enabled (ne (index . 1) "coordinator") (semverCompare ">=1.26-0" $root.Capabilities.KubeVersion.Version) -}}
true
{{- end -}}
{{- end -}}

{{/* OnFailure (restart in place) unless the Job has a podFailurePolicy, which requires Never. */}}
{{- define "syncopate.restartPolicy" -}}
{{- ternary "Never" "OnFailure" (eq (include "syncopate.podFailurePolicyOn" .) "true") -}}
{{- end -}}

{{/*
The labels of a component's Job (not its pods): with kueue.queueName, Kueue's queue label. Kueue's
webhook then creates the Job suspended and Kueue resumes it once admitted; the chart does not write
`suspend: true` itself, because `helm upgrade` would write it back onto a running Job (a three-way
merge against the live object), and suspending a Job deletes its pods. Argument: (list $ COMPONENT).
*/}}
{{- define "syncopate.jobLabels" -}}
{{- $root := index . 0 -}}
{{ include "syncopate.labels" $root }}
app.kubernetes.io/component: {{ index . 1 }}
{{- with $root.Values.kueue.queueName }}
kueue.x-k8s.io/queue-name: {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
Gang scheduling (gang.enabled): one PodGroup for the whole release, so the scheduler places the
pods the job cannot start without all at once or none of them. Its members: the coordinator,
every shard, the evaluator (when enabled) and gang.minWorkers workers (0: workers.replicas, the
job's num_workers, which the coordinator waits for before coordinator.startupGraceSeconds).
*/}}
{{- define "syncopate.podGroup" -}}{{ include "syncopate.fullname" . }}{{- end -}}

{{- define "syncopate.gangMinMember" -}}
{{- $workers := int (default .Values.workers.replicas .Values.gang.minWorkers) -}}
{{- if gt $workers (int .Values.workers.replicas) -}}
{{- fail "gang.minWorkers must not exceed workers.replicas (the gang would wait for workers the Job never starts)" -}}
{{- end -}}
{{- add 1 .Values.shards.replicas (ternary 1 0 .Values.evaluator.enabled) $workers -}}
{{- end -}}

{{- define "syncopate.gangSchedulerName" -}}
{{- default (ternary "volcano" "scheduler-plugins-scheduler" (eq .Values.gang.scheduler "volcano")) .Values.gang.schedulerName -}}
{{- end -}}

{{/* A pod's gang membership: scheduler-plugins' coscheduling finds the PodGroup by this label. */}}
{{- define "syncopate.gangPodLabels" -}}
{{- if and .Values.gang.enabled (eq .Values.gang.scheduler "scheduler-plugins") }}
scheduling.x-k8s.io/pod-group: {{ include "syncopate.podGroup" . }}
{{- end }}
{{- end -}}

{{/*
A pod template's annotations: the component's podAnnotations and, for Volcano, the annotation by
which it finds the PodGroup. Argument: (list $ .Values.X).
*/}}
{{- define "syncopate.podAnnotations" -}}
{{- $root := index . 0 -}}
{{- $annotations := merge (dict) ((index . 1).podAnnotations | default (dict)) -}}
{{- if and $root.Values.gang.enabled (eq $root.Values.gang.scheduler "volcano") -}}
{{- $_ := set $annotations "scheduling.k8s.io/group-name" (include "syncopate.podGroup" $root) -}}
{{- end -}}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Where the job's pods may run on a shared cluster; argument: (list $ .Values.X COMPONENT). A topology
spread constraint without a labelSelector gets this component's pods of this release, so the
values' default (workers and shards over kubernetes.io/hostname) needs no release name.
*/}}
{{- define "syncopate.podScheduling" -}}
{{- $root := index . 0 -}}
{{- $values := index . 1 -}}
{{- with $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- if $root.Values.gang.enabled }}
schedulerName: {{ include "syncopate.gangSchedulerName" $root }}
{{- end }}
{{- with $values.topologySpreadConstraints }}
{{- $own := fromYaml (include "syncopate.selectorLabels" $root) }}
{{- $_ := set $own "app.kubernetes.io/component" (index $ 2) }}
topologySpreadConstraints:
  {{- range . }}
  {{- $constraint := deepCopy . }}
  {{- if not (hasKey $constraint "labelSelector") }}
  {{- $_ := set $constraint "labelSelector" (dict "matchLabels" $own) }}
  {{- end }}
  - {{ toYaml $constraint | nindent 4 | trim }}
  {{- end }}
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
{{- $tolerations := concat (list) ($component.tolerations | default list) }}
{{- if not (kindIs "invalid" $root.Values.nodeLoss.tolerationSeconds) }}
{{- range $key := list "node.kubernetes.io/not-ready" "node.kubernetes.io/unreachable" }}
{{- $named := false }}
{{- range $component.tolerations }}{{ if eq (default "" .key) $key }}{{ $named = true }}{{ end }}{{ end }}
{{- if not $named }}
{{- $tolerations = append $tolerations (dict "key" $key "operator" "Exists" "effect" "NoExecute" "tolerationSeconds" (int $root.Values.nodeLoss.tolerationSeconds)) }}
{{- end }}
{{- end }}
{{- end }}
{{- with $tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
