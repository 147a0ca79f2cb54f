{{/*
gantry.deployment is the Deployment, PodDisruptionBudget and metrics Service of one component. It takes
(dict "root" $ "component" "hub" "values" .Values.hub "args" (list ...)), and optionally "ports",
"volumes" and "volumeMounts": lists of the container's further ports and of the pod's volumes.
*/}}
{{- define "gantry.deployment" -}}
{{- $v := .values -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: gantry-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "gantry.labels" . | nindent 4 }}
spec:
  replicas: {{ $v.replicas }}
  selector:
    matchLabels:
      {{- include "gantry.selectorLabels" . | nindent 6 }}
  strategy:
    # One replica at a time, so that a leader stays while the other rolls.
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    metadata:
      labels:
        {{- include "gantry.labels" . | nindent 8 }}
      {{- with $v.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: gantry-{{ .component }}
      {{- with .root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      # SIGTERM ends the manager: in-flight writes finish and the lease is released for the other replica.
      terminationGracePeriodSeconds: 30
      containers:
      - name: {{ .component }}
        image: {{ include "gantry.image" . }}
        imagePullPolicy: {{ .root.Values.image.pullPolicy }}
        args:
        {{- range .args }}
        - {{ . | quote }}
        {{- end }}
        - "--zap-log-level={{ .root.Values.logLevel }}"
        - "--metrics-secure={{ .root.Values.metrics.secure }}"
        {{- range $v.extraArgs }}
        - {{ . | quote }}
        {{- end }}
        {{- with .env }}
        env:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        ports:
        - {name: metrics, containerPort: 8080, protocol: TCP}
        - {name: probes, containerPort: 8081, protocol: TCP}
        {{- with .ports }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with .volumeMounts }}
        volumeMounts:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        livenessProbe:
          httpGet: {path: /healthz, port: probes}
          initialDelaySeconds: 15
          periodSeconds: 20
        readinessProbe:
          httpGet: {path: /readyz, port: probes}
          initialDelaySeconds: 5
          periodSeconds: 10
        resources:
          {{- toYaml $v.resources | nindent 10 }}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
      {{- with .volumes }}
      volumes:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
---
# Voluntary disruptions (node drains) take one replica at a time.
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: gantry-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "gantry.labels" . | nindent 4 }}
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      {{- include "gantry.selectorLabels" . | nindent 6 }}
{{- if .root.Values.metrics.service }}
---
apiVersion: v1
kind: Service
metadata:
  name: gantry-{{ .component }}-metrics
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "gantry.labels" . | nindent 4 }}
spec:
  selector:
    {{- include "gantry.selectorLabels" . | nindent 4 }}
  ports:
  - {name: metrics, port: 8080, targetPort: metrics, protocol: TCP}
{{- end }}
{{- end }}
