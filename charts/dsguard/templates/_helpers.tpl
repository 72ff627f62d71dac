{{- define "dsguard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dsguard.labels" -}}
app.kubernetes.io/name: dsguard
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "dsguard.selectorLabels" -}}
app.kubernetes.io/name: dsguard
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* clientConfig for one webhook path: the Service, or url when set. */}}
{{- define "dsguard.clientConfig" -}}
{{- if .root.Values.webhook.url }}
url: {{ printf "%s%s" (trimSuffix "/" .root.Values.webhook.url) .path | quote }}
{{- else }}
service:
  name: {{ include "dsguard.fullname" .root }}
  namespace: {{ .root.Release.Namespace }}
  path: {{ .path | quote }}
  port: 443
{{- end }}
{{- with .root.Values.webhook.caBundle }}
caBundle: {{ . }}
{{- end }}
{{- end -}}
