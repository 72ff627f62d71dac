{{/* Full name of the release's resources: fullnameOverride, else the
release name, suffixed with the chart name unless it already contains it. */}}
{{- define "dsguard.fullname" -}}
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

{{- define "dsguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dsguard.labels" -}}
app.kubernetes.io/name: {{ include "dsguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: webhook
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "dsguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dsguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The ServiceAccount dsguard runs as. */}}
{{- define "dsguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dsguard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the serving certificate. */}}
{{- define "dsguard.caSecretName" -}}
{{- printf "%s-ca" (include "dsguard.fullname" .) -}}
{{- end -}}

{{- define "dsguard.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "dsguard.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{/* The image reference: by digest when one is given. */}}
{{- define "dsguard.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Names dsguard itself uses; they must match `dsguard serve`. The policy
ConfigMap name is fixed (the policy webhook's matchCondition names it), and so
is the leader-election Lease (dsguard serve's LeaderElectionID). */}}
{{- define "dsguard.policyConfigMap" -}}dsguard-policy{{- end -}}
{{- define "dsguard.lastGoodConfigMap" -}}dsguard-policy-last-good{{- end -}}
{{- define "dsguard.policyKey" -}}policy.yaml{{- end -}}
{{- define "dsguard.leaseName" -}}dsguard-coverage{{- end -}}

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

{{/* The Secret whose ca.crt verifies dsguard's serving certificate (webhook
and metrics): the self-managed CA, else the serving certificate's Secret. */}}
{{- define "dsguard.caSourceSecretName" -}}
{{- if eq .Values.tls.mode "selfManaged" -}}
{{- include "dsguard.caSecretName" . -}}
{{- else -}}
{{- include "dsguard.tlsSecretName" . -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount name as the API server sees it in request.userInfo. */}}
{{- define "dsguard.serviceAccountUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "dsguard.serviceAccountName" .) -}}
{{- end -}}

{{/* Pod settings the hook Pods share with dsguard's: the image, where they
may run, and the restricted security contexts. */}}
{{- define "dsguard.hookPodSpec" -}}
restartPolicy: Never
automountServiceAccountToken: true
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Labels of hook objects: not the Pods' selector labels, so that neither
the Service nor the NetworkPolicy selects a hook Pod. */}}
{{- define "dsguard.hookLabels" -}}
app.kubernetes.io/name: {{ include "dsguard.name" .root }}-{{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The host the API server calls when webhook.url is set (no port, no
brackets): the serving certificate must be valid for it. */}}
{{- define "dsguard.urlHost" -}}
{{- with .Values.webhook.url -}}
{{- (urlParse .).hostname -}}
{{- end -}}
{{- end -}}

{{/*
The fail-open namespaces, comma-separated: webhook.failOpenNamespaces, and
those of webhook.failOpenIfPresent that exist when the chart is installed or
upgraded. A name that does not exist yet is left out: anyone allowed to
create namespaces could create it and escape every deny there. Without a
cluster to ask (helm template) none of the latter are found.
*/}}
{{- define "dsguard.failOpenNamespaces" -}}
{{- $list := .Values.webhook.failOpenNamespaces -}}
{{- range .Values.webhook.failOpenIfPresent -}}
{{- if lookup "v1" "Namespace" "" . -}}
{{- $list = append $list . -}}
{{- end -}}
{{- end -}}
{{- $list | uniq | join "," -}}
{{- end -}}

{{/*
The addresses the API server advertises: the EndpointSlices of Service
default/kubernetes, looked up at install and upgrade, comma-separated. Without
a cluster to ask (helm template) none are found.
*/}}
{{- define "dsguard.advertisedAPIServerAddresses" -}}
{{- $addrs := list -}}
{{- range (lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "").items -}}
{{- if eq (index (.metadata.labels | default dict) "kubernetes.io/service-name") "kubernetes" -}}
{{- range .endpoints -}}
{{- $addrs = concat $addrs .addresses -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $addrs | uniq | join "," -}}
{{- end -}}

{{/*
The sources dsguard reserves the API server's shares for, without client
authentication (--api-server-addresses): webhook.apiServerAddresses and, with
webhook.apiServerAddressesFromEndpoints, the advertised addresses.
*/}}
{{- define "dsguard.apiServerAddresses" -}}
{{- $list := .Values.webhook.apiServerAddresses -}}
{{- if .Values.webhook.apiServerAddressesFromEndpoints -}}
{{- $advertised := include "dsguard.advertisedAPIServerAddresses" . -}}
{{- if $advertised -}}
{{- $list = concat $list (splitList "," $advertised) -}}
{{- end -}}
{{- end -}}
{{- $list | uniq | join "," -}}
{{- end -}}

{{/*
Every name a generated ValidatingAdmissionPolicy or binding can have
(vap.PossibleNames; vap's TestPossibleNames_TheChartGrantsTheSame keeps the two
in step), one per line: per rule and action, then the exemption gate's.
*/}}
{{- define "dsguard.generatedPolicyNames" -}}
{{- range $r := list "control-plane-toleration" "surge-host-port" "max-unavailable" "readiness-probe" "host-path-read-only" "privileged" "image-pinned" "update-strategy" "invalid-annotation" }}
{{- range $s := list "deny" "deny-ratcheted" "deny-warn" "deny-audit" "warn" "warn-audit" "audit" }}
- dsguard-{{ $r }}-{{ $s }}
{{- end }}
{{- end }}
{{- range $g := list "deny" "warn" }}
- dsguard-exemption-gate-{{ $g }}
{{- end }}
{{- end -}}

{{/*
The DaemonSet entries' matchCondition: every write of the main resource, and
of daemonsets/status only one that adds or changes an exemption or
intended-coverage annotation (policy.WrittenGatedAnnotations).
*/}}
{{- define "dsguard.statusWritesGatedAnnotations" -}}
- name: main-resource-or-gated-annotation-written
  expression: >-
    !has(request.subResource) || request.subResource != 'status' ||
    (has(object.metadata.annotations) && object.metadata.annotations.exists(k,
    (k == 'coverage.dsguard.io/intended' || k.startsWith('exempt.dsguard.io/')) &&
    (!has(oldObject.metadata.annotations) || !(k in oldObject.metadata.annotations) ||
    oldObject.metadata.annotations[k] != object.metadata.annotations[k])))
{{- end }}

{{/* The ClusterRole that lets its subjects grant exemptions. */}}
{{- define "dsguard.exemptionGranterRole" -}}
{{ include "dsguard.fullname" . }}-exemption-granter
{{- end }}
