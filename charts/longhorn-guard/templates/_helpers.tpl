{{/*
Name of every object: fullnameOverride, else the release name when it contains the chart's
name, else "<release>-longhorn-guard". 63 characters at most (a DNS label).
*/}}
{{- define "longhorn-guard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Labels of every object: the two manifests/base puts on everything, and Helm's own.
*/}}
{{- define "longhorn-guard.labels" -}}
app.kubernetes.io/name: longhorn-guard
app.kubernetes.io/part-of: longhorn-guard
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The server pods' labels, and the selector of the Deployment, Service and PDB (as the base).
*/}}
{{- define "longhorn-guard.selectorLabels" -}}
app.kubernetes.io/component: webhook
app.kubernetes.io/name: longhorn-guard
{{- end -}}

{{/*
The image reference: repository@digest when a digest is set, else repository:tag (tag empty:
the chart's appVersion).
*/}}
{{- define "longhorn-guard.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The Secret the pods mount: tls.existingSecret, else "<fullname>-tls". */}}
{{- define "longhorn-guard.tlsSecret" -}}
{{- .Values.tls.existingSecret | default (printf "%s-tls" (include "longhorn-guard.fullname" .)) -}}
{{- end -}}

{{/*
The policy file's text: .Values.policy with gate.image defaulted to the server's image.
*/}}
{{- define "longhorn-guard.policy" -}}
{{- $policy := deepCopy .Values.policy -}}
{{- $gate := $policy.gate | default dict -}}
{{- if not $gate.image -}}
{{- $_ := set $gate "image" (include "longhorn-guard.image" .) -}}
{{- end -}}
{{- $_ := set $policy "gate" $gate -}}
{{- toYaml $policy -}}
{{- end -}}

{{/*
The policy ConfigMap's name: "<fullname>-policy-" and the content hash kustomize's
configMapGenerator gives it (sha256 of the JSON {"data", "kind": "ConfigMap", "name": ""}, the
generator hashing before it names; the first 10 hex digits with 0 1 3 a e spelled g h k m t):
a new policy is a new ConfigMap, so it rolls the pods, and the same content gets the same
suffix as from manifests/base. tests/chart checks the suffix against kustomize's own.
*/}}
{{- define "longhorn-guard.policyConfigMap" -}}
{{- /* The text as the ConfigMap holds it: a block scalar, so one final newline. */ -}}
{{- $data := dict "policy.yaml" (printf "%s\n" (include "longhorn-guard.policy" .)) -}}
{{- $hash := dict "data" $data "kind" "ConfigMap" "name" "" | toJson | sha256sum | trunc 10 -}}
{{- $hash = $hash | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t" -}}
{{- printf "%s-policy-%s" (include "longhorn-guard.fullname" .) $hash -}}
{{- end -}}

{{/*
The webhooks' clientConfig for PATH: the Service, and the CA unless cert-manager injects it.
Needs the dict {"root": ., "path": PATH, "caBundle": base64 PEM or ""}.
*/}}
{{- define "longhorn-guard.clientConfig" -}}
clientConfig:
  {{- if .caBundle }}
  caBundle: {{ .caBundle }}
  {{- end }}
  service:
    name: {{ include "longhorn-guard.fullname" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
{{- end -}}

{{/*
The not-a-trusted-user matchCondition of the delete entries, as one list item: the API server
skips the users of policy.drain.trustedUsers itself (the server checks the same list, so the
condition only saves calls). Nothing when the list is empty.
*/}}
{{- define "longhorn-guard.notTrusted" -}}
{{- $users := list -}}
{{- range ((.Values.policy | default dict).drain | default dict).trustedUsers -}}
{{- $users = append $users (printf "'%s'" .) -}}
{{- end -}}
{{- if $users -}}
- name: not-a-trusted-user
  expression: {{ printf "!(request.userInfo.username in [%s])" (join ", " $users) | quote }}
{{- end -}}
{{- end -}}

{{/* namespaceSelector of the namespaced entries: longhorn-system only, never this one or kube-system. */}}
{{- define "longhorn-guard.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: In
      values: ["longhorn-system"]
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: [{{ .Release.Namespace | quote }}, "kube-system"]
{{- end -}}

{{/*
How the init gate reaches instance-manager pods (initGate.via): "policy" or "webhook". auto:
policy where the API server serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
(Kubernetes 1.36 and later), else webhook.
*/}}
{{- define "longhorn-guard.initGateVia" -}}
{{- $via := .Values.initGate.via | default "auto" -}}
{{- if eq $via "auto" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}
policy
{{- else -}}
webhook
{{- end -}}
{{- else -}}
{{- $via -}}
{{- end -}}
{{- end -}}

{{/* The gate's image: policy.gate.image, else the server's. */}}
{{- define "longhorn-guard.gateImage" -}}
{{- (.Values.policy.gate | default dict).image | default (include "longhorn-guard.image" .) -}}
{{- end -}}

{{/*
The gate's --timeout as the webhook writes it (Rust humantime, spaces removed: "1m",
"1m30s", "1s500ms"): policy.gate.timeout ("90s", "1m30s", "500ms", or whole seconds) summed
in nanoseconds and written from hours down to nanoseconds, zero parts left out.
*/}}
{{- define "longhorn-guard.gateTimeout" -}}
{{- $t := (.Values.policy.gate | default dict).timeout | default "60s" -}}
{{- $ns := 0 -}}
{{- $unit := dict "ns" 1 "us" 1000 "ms" 1000000 "s" 1000000000 "m" 60000000000 "h" 3600000000000 "d" 86400000000000 -}}
{{- if kindIs "string" $t -}}
{{- range regexFindAll "[0-9]+(ns|us|ms|s|m|h|d)" $t -1 -}}
{{- $u := regexFind "[a-z]+$" . -}}
{{- $ns = add $ns (mul (trimSuffix $u . | int64) (index $unit $u)) -}}
{{- end -}}
{{- else -}}
{{- $ns = mul (int64 $t) 1000000000 -}}
{{- end -}}
{{- $out := "" -}}
{{- range $u := list "h" "m" "s" "ms" "us" "ns" -}}
{{- $size := index $unit $u -}}
{{- $n := div $ns $size -}}
{{- if gt $n 0 -}}
{{- $out = printf "%s%d%s" $out $n $u -}}
{{- $ns = sub $ns (mul $n $size) -}}
{{- end -}}
{{- end -}}
{{- $out | default "0s" -}}
{{- end -}}
