# The replica rules under `replicas.action: deny`, as kubectl prints them (sourced by e2e/run.sh).
#
# local mode only: a second `serve` on 127.0.0.1:$((PORT + 1)) with a deny policy and the demo
# snapshot (the rule needs no watch), behind a webhook configuration of its own that matches one
# StorageClass name, so the main server's warn-mode checks are not touched.

DENY_PID=
DENY_WEBHOOK=longhorn-guard-e2e-replicas-deny
DENY_SC=longhorn-e2e-deny-1-replica

replicas_deny_checks() {
	[ "$MODE" = local ] || {
		log "replicas.action: deny (skipped: local mode only)"
		return 0
	}
	log "replicas.action: deny: a StorageClass with numberOfReplicas \"1\" is refused with 422 Invalid"
	local port=$((PORT + 1))
	printf 'replicas:\n  action: deny\n' >"$WORK/deny-policy.yaml"
	"$BIN" serve --tls-dir "$WORK/certs" --listen "127.0.0.1:$port" --state "$ROOT/demo/cluster-snapshot.yaml" \
		--policy "$WORK/deny-policy.yaml" >"$WORK/deny-server.log" 2>&1 &
	DENY_PID=$!
	if ! wait_for 30 curl -sf --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$port/readyz"; then
		sed 's/^/    /' "$WORK/deny-server.log"
		fail "the deny-mode server became ready"
		return 0
	fi
	k apply -f - <<-EOF
		apiVersion: admissionregistration.k8s.io/v1
		kind: ValidatingWebhookConfiguration
		metadata: {name: $DENY_WEBHOOK, labels: {longhorn-guard-e2e: "true"}}
		webhooks:
		  - name: replicas-deny.longhorn-guard.io
		    rules: [{apiGroups: [storage.k8s.io], apiVersions: [v1], operations: [CREATE], resources: [storageclasses], scope: "*"}]
		    matchConditions: [{name: this-one, expression: "object.metadata.name == '$DENY_SC'"}]
		    failurePolicy: Fail
		    sideEffects: None
		    admissionReviewVersions: [v1]
		    timeoutSeconds: 5
		    clientConfig: {url: "https://127.0.0.1:$port/validate", caBundle: "$(base64 -w0 <"$WORK/certs/ca.crt")"}
	EOF
	sleep 3 # the API server picks up webhook configurations asynchronously
	local sc
	sc=$(
		cat <<-EOF
			apiVersion: storage.k8s.io/v1
			kind: StorageClass
			metadata: {name: $DENY_SC, labels: {longhorn-guard-e2e: "true"}}
			provisioner: driver.longhorn.io
			parameters: {numberOfReplicas: "1", staleReplicaTimeout: "30"}
		EOF
	)
	local want="The StorageClass \"$DENY_SC\" is invalid: parameters.numberOfReplicas: longhorn-guard: storageclass $DENY_SC: numberOfReplicas=1 has no redundancy; policy minimum is 3"
	run k create -f - <<<"$sc"
	check "kubectl create of the StorageClass fails" rc_is 1
	check "kubectl create prints: $want" exact_line "$want"
	run k apply -f - <<<"$sc"
	check "kubectl apply prints the same line" all 'rc_is 1' 'exact_line "$want"'
	check "the StorageClass was not created" gone get storageclass "$DENY_SC"
	replicas_deny_cleanup
}

# exact_line LINE: $OUT has LINE as one whole line.
exact_line() { grep -qxF -- "$1" <<<"$OUT"; }

replicas_deny_cleanup() {
	if [ "$APISERVER" != own ]; then
		k delete validatingwebhookconfiguration "$DENY_WEBHOOK" --ignore-not-found >/dev/null 2>&1 || true
	fi
	if [ -n "$DENY_PID" ]; then
		stop_pid "$DENY_PID"
		DENY_PID=
	fi
}
