{{/*
Names do not depend on the release: users and the other clusters refer to them (the namespace, the
ServiceAccounts whose tokens go into kubeconfigs, the Lease names the programs use).
*/}}

{{- define "gantry.hub" -}}
{{- if has .Values.role (list "hub" "both") -}}
{{- if semverCompare "<1.36.0-0" .Capabilities.KubeVersion.Version -}}
{{- fail (printf "role %s installs the hub, whose MutatingAdmissionPolicies need Kubernetes 1.36 or later, and this cluster runs %s: install the hub on a newer cluster (a worker, role agent, may run 1.33 or later)" .Values.role .Capabilities.KubeVersion.Version) -}}
{{- end -}}
true
{{- end -}}
{{- end }}

{{- define "gantry.agent" -}}
{{- if has .Values.role (list "agent" "both") -}}
{{- if ne .Release.Namespace "gantry-system" -}}
{{- fail (printf "role %s installs the agent, which lives in gantry-system as the hub expects on every worker: install with --namespace gantry-system (not %s)" .Values.role .Release.Namespace) -}}
{{- end -}}
{{- if not .Values.agent.clusterName -}}
{{- fail (printf "role %s needs agent.clusterName, the name this worker is registered under on the hub" .Values.role) -}}
{{- end -}}
true
{{- end -}}
{{- end }}

{{/*
gantry.endpoint is true when the hub serves its endpoint; it serves HTTPS only, so it needs its Secret.
*/}}
{{- define "gantry.endpoint" -}}
{{- $e := .Values.hub.endpoint -}}
{{- if and (include "gantry.hub" .) $e.enabled -}}
{{- if not $e.tls.secretName -}}
{{- fail (printf "hub.endpoint.enabled needs hub.endpoint.tls.secretName: the endpoint serves HTTPS only, with the certificate and key of a kubernetes.io/tls Secret in %s (tls.crt, tls.key)" .Release.Namespace) -}}
{{- end -}}
true
{{- else if and (include "gantry.hub" .) $e.advertiseURL -}}
{{- fail "hub.endpoint.advertiseURL tells users where the endpoint is: turn it on with hub.endpoint.enabled" -}}
{{- end -}}
{{- end }}

{{/* gantry.labels takes (dict "root" $ "component" "hub"). */}}
{{- define "gantry.labels" -}}
{{ include "gantry.selectorLabels" . }}
app.kubernetes.io/part-of: gantry
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{- end }}

{{- define "gantry.selectorLabels" -}}
app.kubernetes.io/name: gantry
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "gantry.image" -}}
{{ .root.Values.image.registry }}/gantry-{{ .component }}:{{ .root.Values.image.tag | default .root.Chart.AppVersion }}
{{- end }}

{{/*
gantry.clusterProfileProviders is the hub's provider file, JSON as the cluster-inventory-api reads it.
*/}}
{{- define "gantry.clusterProfileProviders" -}}
{{ dict "providers" .Values.hub.clusterProfiles.providers | toPrettyJson }}
{{- end -}}

{{/*
gantry.metricsReviews are the rules a program's metrics endpoint needs under metrics.secure: its cluster
reviews each caller's token (TokenReview) and right to get /metrics (SubjectAccessReview).
*/}}
{{- define "gantry.metricsReviews" -}}
{{- if .Values.metrics.secure }}
# The metrics endpoint has the cluster review each caller's token and right to get /metrics.
- apiGroups: ["authentication.k8s.io"]
  resources: ["tokenreviews"]
  verbs: ["create"]
- apiGroups: ["authorization.k8s.io"]
  resources: ["subjectaccessreviews"]
  verbs: ["create"]
{{- end }}
{{- end }}
