# The init gate as a MutatingAdmissionPolicy, on the real API server (sourced by e2e/run.sh).
#
# gate_policy_record webhook   while longhorn-guard serves the mutating webhook: server-side
#                              dry-run creates of every case below, the objects kept;
# gate_policy_checks           after the guard is stopped: the shipped policy
#                              (manifests/components/gate-policy) is applied, the same dry-run
#                              creates are made again, and each object must equal the webhook's,
#                              field for field; then the policy's failure mode is shown.
#
# The cases are the fixture pods (/work/shared/fixtures/admission/pod-create-*.json) and variants
# of the instance-manager pod: both annotation forms, existing init containers, no token mount,
# a podinfo volume already there (the gate's, or another), the gate already there, only the
# legacy networks-status annotation, unreadable annotations, another namespace.

GP_FIXTURES=${E2E_FIXTURES:-$ROOT/../shared/fixtures/admission}
GP_DIR=
jq_true() { jq -en "$@" >/dev/null; }

# served_v1 KIND: the API server serves KIND in admissionregistration.k8s.io/v1 (not only in a
# beta or alpha version of the group).
served_v1() {
	k get --raw /apis/admissionregistration.k8s.io/v1 2>/dev/null | jq -e --arg kind "$1" 'any(.resources[]; .kind == $kind)' >/dev/null
}
# gate_policy_served: v1 MutatingAdmissionPolicy (Kubernetes 1.36+).
gate_policy_served() { served_v1 MutatingAdmissionPolicy; }

# gate_policy_cases DIR: one pod per file, DIR/<expect>.<case>.json (expect: gate | none).
gate_policy_cases() {
	local dir=$1 im plain init web n=0
	mkdir -p "$dir"
	local clean='.request.object | del(.metadata.uid, .metadata.creationTimestamp, .metadata.resourceVersion,
		.metadata.managedFields, .metadata.generateName, .metadata.ownerReferences, .status)
		| .metadata.labels["longhorn-guard-e2e"] = "true"'
	im=$(jq -c "$clean" "$GP_FIXTURES/pod-create-instance-manager-storage-network.json")
	init=$(jq -c "$clean" "$GP_FIXTURES/pod-create-instance-manager-with-initcontainers.json")
	plain=$(jq -c "$clean" "$GP_FIXTURES/pod-create-instance-manager.json")
	web=$(jq -c "$clean" "$GP_FIXTURES/pod-create-default.json")
	case_() { # EXPECT NAME BASE JQ-FILTER [ARGS...]
		local expect=$1 name=$2 base=$3 filter=$4
		shift 4
		n=$((n + 1))
		jq -c "$@" --arg pod "gatepolicy-$n-$name" "$filter | .metadata.name = (if .metadata.namespace == \"$LH_NS\" then \"instance-manager-\" else \"\" end) + \$pod" \
			<<<"$base" >"$dir/$expect.$name.json"
	}
	local set='.metadata.annotations["k8s.v1.cni.cncf.io/networks"] = $v'
	case_ gate json-form "$im" .
	case_ gate comma-form "$im" "$set" --arg v 'kube-system/storage-net@lhnet1'
	case_ gate comma-pod-namespace "$im" "$set" --arg v 'storage-net'
	case_ gate comma-several "$im" "$set" --arg v ' kube-system/storage-net@lhnet1 , other,ns2/n2 '
	case_ gate json-keys-any-case "$im" "$set" \
		--arg v '[{"NAME": "storage-net", "Namespace": "", "interface": ""}, {"name": "b", "namespace": "ns2", "interface": "lhnet2", "ips": ["10.0.0.1/24"], "x": null}]'
	case_ gate json-compact "$im" "$set" --arg v '[{"namespace":"kube-system","name":"storage-net","interface":"lhnet1"}]'
	case_ gate existing-init-containers "$init" .
	case_ gate no-token-mount "$im" '.spec.automountServiceAccountToken = false
		| .spec.volumes = [.spec.volumes[] | select(.name | startswith("kube-api-access") | not)]
		| .spec.containers = [.spec.containers[] | del(.volumeMounts)]'
	case_ gate podinfo-volume-ours "$im" '.spec.volumes += [{"name": "longhorn-guard-podinfo", "downwardAPI": {"items": [{"path": "annotations", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations"}}]}}]'
	case_ none podinfo-volume-other "$im" '.spec.volumes += [{"name": "longhorn-guard-podinfo", "emptyDir": {}}]'
	case_ none gate-already-there "$init" '.spec.initContainers[0].name = "longhorn-guard-gate"'
	case_ none networks-status-only "$im" 'del(.metadata.annotations["k8s.v1.cni.cncf.io/networks"])
		| .metadata.annotations["k8s.v1.cni.cncf.io/networks-status"] = "[{\"name\": \"kube-system/storage-net\", \"interface\": \"lhnet1\", \"ips\": [\"10.0.0.5\"]}]"'
	case_ none im-without-networks "$plain" .
	case_ none plain-pod "$web" .
	case_ none other-namespace "$im" '.metadata.namespace = "default" | .spec.serviceAccountName = "default"'
	local v i=0
	for v in '' '[]' 'a/b/c' '[{"name": "Storage_Net"}]' '{"name": "x"}' 'x/a,,x/b' '[{"namespace": "a"}]' \
		'a/b@averyveryverylongname' 'kube-system/storage-net@' '/storage-net' '[{"name": "a", "namespace": 5}]' \
		'[{"name": "a",}]' 'kube-system/storage-net@lh:net'; do
		i=$((i + 1))
		case_ none "unreadable-$i" "$im" "$set" --arg v "$v"
	done
}

# gate_policy_record WHICH: every case, created with --dry-run=server, into $GP_DIR/<case>.WHICH.json
# (uid, creationTimestamp and managedFields removed: they differ on every create).
gate_policy_record() {
	local f out
	for f in "$GP_DIR"/cases/*.json; do
		out=$GP_DIR/$(basename "$f" .json).$1.json
		if ! k create --dry-run=server -o json -f "$f" 2>"$out.err" |
			jq -S 'del(.metadata.uid, .metadata.creationTimestamp, .metadata.managedFields)' >"$out"; then
			printf '    %s: %s\n' "$(basename "$f")" "$(cat "$out.err")"
		fi
	done
}

gate_policy_prepare() {
	if ! gate_policy_served; then
		log "init gate as an admission policy: skipped (the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy)"
		return
	fi
	GP_DIR=$WORK/gate-policy
	gate_policy_cases "$GP_DIR/cases"
	log "init gate as an admission policy: $(ls "$GP_DIR/cases" | wc -l) cases, dry-run through the webhook first"
	gate_policy_record webhook
}

gate_policy_ready() {
	k create --dry-run=server -o jsonpath='{.spec.initContainers[*].name}' -f "$GP_DIR/cases/gate.json-form.json" 2>/dev/null |
		grep -q longhorn-guard-gate
}

gate_policy_checks() {
	local f name expect w p inits
	[ -n "$GP_DIR" ] || return 0
	log "init gate as a MutatingAdmissionPolicy, longhorn-guard stopped: the webhook's injection, from the API server itself"
	run k apply -f "$ROOT/manifests/components/gate-policy/gate-policy.yaml"
	check "the shipped MutatingAdmissionPolicy and binding are accepted by the API server" rc_is 0
	run k get mutatingadmissionpolicies.admissionregistration.k8s.io longhorn-guard-gate \
		-o jsonpath='{.status.typeChecking}{"\n"}'
	check "the policy type-checks without warnings" lacks 'expressionWarnings'
	if ! wait_for 30 gate_policy_ready; then
		fail "the policy injects the gate within 30s of being applied"
		return
	fi
	gate_policy_record policy
	for f in "$GP_DIR"/cases/*.json; do
		name=$(basename "$f" .json)
		expect=${name%%.*}
		w=$GP_DIR/$name.webhook.json
		p=$GP_DIR/$name.policy.json
		inits=$(jq -r '[.spec.initContainers[]?.name] | join(",")' "$p")
		printf '    %-40s init containers: [%s]\n' "${name#*.}" "$inits"
		if [ ! -s "$w" ] || [ ! -s "$p" ]; then
			fail "${name#*.}: both dry-run creates succeeded"
			continue
		fi
		if diff -u "$w" "$p" >"$GP_DIR/$name.diff"; then
			pass "${name#*.}: the pod the policy makes equals the webhook's, field for field"
		else
			sed -n '1,40s/^/      /p' "$GP_DIR/$name.diff"
			fail "${name#*.}: the pod the policy makes equals the webhook's, field for field"
		fi
		case $expect in
		gate) check "${name#*.}: gets the gate: its init containers and one longhorn-guard-gate after them" \
			jq_true --slurpfile in "$f" --slurpfile out "$p" \
			'[$out[0].spec.initContainers[].name] == [$in[0].spec.initContainers[]?.name] + ["longhorn-guard-gate"]' ;;
		none) check "${name#*.}: gets no gate (init containers and volumes as they were)" \
			jq_true --slurpfile in "$f" --slurpfile out "$p" \
			'[$out[0].spec.initContainers[]?.name] == [$in[0].spec.initContainers[]?.name] and [$out[0].spec.volumes[]?.name] == [$in[0].spec.volumes[]?.name]' ;;
		esac
	done
	gate_policy_failure_mode
}

# What the policy does when its expression fails: an annotation of 3,300 networks (250 KB, as
# no pod has) whose reading runs out of the API server's CEL cost budget. failurePolicy Ignore:
# the pod is created, without the gate. With Fail (a copy of the policy, for the comparison)
# the same pod is refused: Longhorn could not start that instance manager at all.
gate_policy_failure_mode() {
	local big="$GP_DIR/huge-annotation.json"
	log "the policy's failure mode: an expression that fails (out of CEL cost budget on a 250 KB annotation)"
	jq -nc '[range(3300) | {namespace: "kube-system", name: "storage-net", interface: "lhnet1"}] | tojson' |
		jq -c --slurpfile v /dev/stdin '.metadata.name = "instance-manager-gatepolicy-huge" | .metadata.annotations["k8s.v1.cni.cncf.io/networks"] = $v[0]' \
			"$GP_DIR/cases/gate.json-form.json" >"$big"
	printf '    annotation: %s bytes\n' "$(jq -r '.metadata.annotations["k8s.v1.cni.cncf.io/networks"] | length' "$big")"
	run k create --dry-run=server -o jsonpath='{.metadata.name} init containers: [{.spec.initContainers[*].name}]' -f "$big"
	check "failurePolicy Ignore: the instance-manager pod is created (without the gate) when the expression fails" \
		all 'rc_is 0' 'has "init containers: []"'
	k get mutatingadmissionpolicy longhorn-guard-gate -o json |
		jq '.metadata = {name: "longhorn-guard-gate-fail"} | .spec.failurePolicy = "Fail"' >"$GP_DIR/fail-policy.json"
	k get mutatingadmissionpolicybinding longhorn-guard-gate -o json |
		jq '.metadata = {name: "longhorn-guard-gate-fail"} | .spec.policyName = "longhorn-guard-gate-fail"' >"$GP_DIR/fail-binding.json"
	k apply -f "$GP_DIR/fail-policy.json" -f "$GP_DIR/fail-binding.json" >/dev/null
	sleep 3 # the API server loads admission policies asynchronously
	run k create --dry-run=server -o jsonpath='{.metadata.name}' -f "$big"
	check "for comparison, failurePolicy Fail: the same pod is refused (out of cost budget): an instance manager that could never start" \
		all 'rc_not 0' 'has "cost budget"'
	k delete -f "$GP_DIR/fail-binding.json" -f "$GP_DIR/fail-policy.json" >/dev/null
}

# replicas_policy_checks: the replica-count ValidatingAdmissionPolicy (`longhorn-guard
# replicas-policy`, manifests/components/replicas-policy) rendered for replicas.action deny, with
# longhorn-guard stopped: the API server itself refuses what the webhook would deny, and lets
# through what it would only warn about.
replicas_policy_checks() {
	local vap=$WORK/replicas-policy.yaml
	# v1 ValidatingAdmissionPolicy: Kubernetes 1.30+, so every supported version.
	if ! served_v1 ValidatingAdmissionPolicy; then
		fail "the API server serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (Kubernetes 1.30+)"
		return 0
	fi
	log "replica counts as a ValidatingAdmissionPolicy (replicas.action deny), longhorn-guard stopped"
	printf 'replicas: {minimum: 3, action: deny}\n' >"$WORK/replicas-deny-policy.yaml"
	"$BIN" replicas-policy --policy "$WORK/replicas-deny-policy.yaml" >"$vap"
	run k apply -f "$vap"
	check "the rendered ValidatingAdmissionPolicy, binding and parameter ConfigMap are accepted" rc_is 0
	sc() { printf 'apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: %s}\nprovisioner: %s\nparameters: {numberOfReplicas: "%s"}\n' "$@"; }
	vol() { printf 'apiVersion: longhorn.io/v1beta2\nkind: Volume\nmetadata: {name: %s, namespace: %s}\nspec: {numberOfReplicas: %s, size: "1073741824", frontend: blockdev, dataEngine: v1, accessMode: rwo}\n' "$@"; }
	wait_for 30 eval '! sc longhorn-e2e-vap-1 driver.longhorn.io 1 | k create --dry-run=server -f - >/dev/null 2>&1' || true
	run k create --dry-run=server -f - <<<"$(sc longhorn-e2e-vap-1 driver.longhorn.io 1)"
	check "StorageClass numberOfReplicas \"1\": refused by the API server with the webhook's text" \
		all 'rc_not 0' 'has "storageclass longhorn-e2e-vap-1: numberOfReplicas=1 has no redundancy; policy minimum is 3"'
	run k create --dry-run=server -f - <<<"$(sc longhorn-e2e-vap-3 driver.longhorn.io 3)"
	check "StorageClass numberOfReplicas \"3\": created" rc_is 0
	run k create --dry-run=server -f - <<<"$(sc longhorn-e2e-vap-0 driver.longhorn.io 0)"
	check "StorageClass numberOfReplicas \"0\" (the default-replica-count Setting: the webhook's to check): created" rc_is 0
	run k create --dry-run=server -f - <<<"$(sc other-e2e-vap-1 other.example.com 1)"
	check "another provisioner's StorageClass: created" rc_is 0
	run k create --dry-run=server -f - <<<"$(vol vol-e2e-vap-1 "$LH_NS" 1)"
	check "Volume numberOfReplicas 1: refused" all 'rc_not 0' 'has "volume vol-e2e-vap-1: numberOfReplicas=1 has no redundancy; policy minimum is 3"'
	run k create --dry-run=server -f - <<<"$(vol vol-e2e-vap-3 "$LH_NS" 3)"
	check "Volume numberOfReplicas 3: created" rc_is 0
	run k -n "$LH_NS" label --dry-run=server volumes.longhorn.io vol-e2e-one e2e-touch=1
	check "an update that keeps an already-low count (a label on vol-e2e-one, 1 replica): allowed" rc_is 0
	run k -n "$LH_NS" patch --dry-run=server volumes.longhorn.io vol-degraded --type=merge -p '{"spec":{"numberOfReplicas":1}}'
	check "an update that lowers a count below the minimum (vol-degraded 2 -> 1): refused" all 'rc_not 0' 'has "policy minimum is 3"'
	k delete -f "$vap" >/dev/null
}
