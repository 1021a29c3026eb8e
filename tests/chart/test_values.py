"""Each value reaches the objects it is documented to change, and nothing else moves."""

from __future__ import annotations

import base64
import re

import pytest

from chartlib import (
    base_policy,
    container,
    find,
    kinds,
    notes,
    policy_text,
    render,
    webhook_entries,
)
import helm_python as helm

DIGEST = "sha256:" + "ab" * 32
CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
# drain.trustedUsers as the base policy file lists them (the chart's default is the same list).
TRUSTED = base_policy()["drain"]["trustedUsers"]


def policy(objs):
    return helm.values_from_yaml(policy_text(objs))


@pytest.mark.parametrize(
    "image, want",
    [
        ({}, "ghcr.io/longhorn-guard/longhorn-guard:0.1.0"),
        ({"repository": "registry.local/lg", "tag": "0.2.0-rc1"}, "registry.local/lg:0.2.0-rc1"),
        ({"tag": "ignored", "digest": DIGEST}, f"ghcr.io/longhorn-guard/longhorn-guard@{DIGEST}"),
    ],
)
def test_image_is_the_servers_and_the_gates(chart, image, want):
    objs = render(chart, {"image": {**image, "pullPolicy": "Always"}})
    assert container(objs)["image"] == want
    assert container(objs)["imagePullPolicy"] == "Always"
    assert policy(objs)["gate"]["image"] == want


def test_gate_image_of_its_own_wins(chart):
    objs = render(chart, {"policy": {"gate": {"image": "mirror.local/lg:0.1.0"}}})
    assert policy(objs)["gate"]["image"] == "mirror.local/lg:0.1.0"
    assert container(objs)["image"] == "ghcr.io/longhorn-guard/longhorn-guard:0.1.0"


def test_scheduling_values_reach_the_pod(chart):
    values = {
        "replicas": 3,
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": None, "memory": "512Mi"}},
        "priorityClassName": "guard-critical",
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
        "podAnnotations": {"example.com/team": "storage"},
        "imagePullSecrets": [{"name": "regcred"}],
        "terminationGracePeriodSeconds": 45,
    }
    objs = render(chart, values)
    deploy = find(objs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 3
    # Maps merge with the defaults (Helm); null removes a key.
    assert container(objs)["resources"] == {"requests": values["resources"]["requests"], "limits": {"memory": "512Mi"}}
    for k in ("priorityClassName", "nodeSelector", "tolerations", "imagePullSecrets",
              "terminationGracePeriodSeconds"):
        assert pod[k] == values[k], k
    assert pod["affinity"] == {**chart.values["affinity"], **values["affinity"]}
    assert deploy["spec"]["template"]["metadata"]["annotations"] == values["podAnnotations"]
    assert find(objs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1


def test_empty_priority_class_and_null_affinity_are_left_out(chart):
    pod = find(render(chart, {"priorityClassName": "", "affinity": None}), "Deployment")["spec"]["template"]["spec"]
    assert "priorityClassName" not in pod and "affinity" not in pod


def test_one_replica_has_no_pdb_to_hold_up_its_nodes_drain(chart):
    objs = render(chart, {"replicas": 1})
    assert find(objs, "Deployment")["spec"]["replicas"] == 1
    assert not kinds(objs, "PodDisruptionBudget")


def test_serve_flags_are_typed_values(chart):
    serve = {
        "maxBodyBytes": 7340032,
        "headerReadTimeout": "3s",
        "idleTimeout": "150s",
        "requestTimeout": "9s",
        "shutdownDelay": "20s",
        "shutdownGrace": "15s",
        "shutdownIdleWait": "100s",
        "maxConnections": 1024,
        "tlsReloadInterval": "5s",
        "checkInterval": "0s",
        "freshnessProbeInterval": "500ms",
        "maxConfirmations": 4,
        "logFormat": "text",
        "logLevel": "longhorn_guard=debug",
    }
    c = container(render(chart, {"serve": serve}))
    assert c["args"] == [
        "serve",
        "--tls-dir=/etc/longhorn-guard/tls",
        "--listen=0.0.0.0:8443",
        "--policy=/etc/longhorn-guard/policy/policy.yaml",
        "--check-interval=0s",
        "--freshness-probe-interval=500ms",
        "--header-read-timeout=3s",
        "--idle-timeout=150s",
        "--max-body-bytes=7340032",
        "--max-confirmations=4",
        "--max-connections=1024",
        "--request-timeout=9s",
        "--shutdown-delay=20s",
        "--shutdown-grace=15s",
        "--shutdown-idle-wait=100s",
        "--tls-reload-interval=5s",
    ]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["LONGHORN_GUARD_LOG_FORMAT"] == "text"
    assert env["LONGHORN_GUARD_LOG"] == "longhorn_guard=debug"


def test_client_ca_is_mounted_from_its_secret(chart):
    objs = render(chart, {"serve": {"clientCASecret": "apiserver-client-ca"}})
    c = container(objs)
    assert "--client-ca=/etc/longhorn-guard/client-ca/ca.crt" in c["args"]
    assert {"name": "client-ca", "mountPath": "/etc/longhorn-guard/client-ca", "readOnly": True} in c["volumeMounts"]
    vols = {v["name"]: v for v in find(objs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert vols["client-ca"]["secret"] == {"secretName": "apiserver-client-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    # The kubelet presents no client certificate: TCP probes.
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["tcpSocket"] == {"port": "https"} and "httpGet" not in c[probe]
    assert container(render(chart))["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_serve_defaults_pass_no_flag(chart):
    c = container(render(chart))
    assert len(c["args"]) == 4
    assert "LONGHORN_GUARD_LOG" not in {e["name"] for e in c["env"]}


def test_each_webhooks_failure_policy_and_timeout(chart):
    values = {
        "webhooks": {
            "drainEviction": {"failurePolicy": "Ignore", "ignoreWhileDown": True, "timeoutSeconds": 15},
            "nodeDelete": {"failurePolicy": "Ignore", "timeoutSeconds": 12},
            "nodeCordon": {"failurePolicy": "Fail", "timeoutSeconds": 3},
            "replicas": {"failurePolicy": "Fail", "timeoutSeconds": 4},
            "initGate": {"failurePolicy": "Fail", "timeoutSeconds": 2},
            "podDelete": {"failurePolicy": "Ignore", "timeoutSeconds": 7},
            "instanceManagerDelete": {"failurePolicy": "Ignore", "timeoutSeconds": 8},
            "budgetDelete": {"failurePolicy": "Ignore", "timeoutSeconds": 9},
        }
    }
    entries = webhook_entries(render(chart, values))
    got = {n.split(".")[0]: (e["failurePolicy"], e["timeoutSeconds"]) for n, e in entries.items()}
    assert got == {
        "drain-eviction": ("Ignore", 15),
        "node-delete": ("Ignore", 12),
        "node-cordon": ("Fail", 3),
        "replicas": ("Fail", 4),
        "init-gate": ("Fail", 2),
        "pod-delete": ("Ignore", 7),
        "instance-manager-delete": ("Ignore", 8),
        "budget-delete": ("Ignore", 9),
    }
    assert "unchecked" in notes(chart, values)


def test_eviction_webhook_fails_closed_by_default(chart):
    entries = webhook_entries(render(chart))
    assert entries["drain-eviction.longhorn-guard.io"]["failurePolicy"] == "Fail"
    assert "failed calling webhook" in notes(chart)


DELETES = ("pod-delete", "instance-manager-delete", "budget-delete")


def skipped_users(entry) -> list[str] | None:
    """The usernames an entry's not-a-trusted-user matchCondition skips (None: no such condition)."""
    for c in entry.get("matchConditions") or []:
        if c["name"] == "not-a-trusted-user":
            m = re.fullmatch(r"!\(request\.userInfo\.username in \[(.*)\]\)", c["expression"])
            assert m, c["expression"]
            return re.findall(r"'([^']*)'", m[1])
    return None


def test_delete_webhooks_skip_the_trusted_users_of_the_policy(chart):
    # Default: the list the server trusts, in the policy ConfigMap and every delete entry alike.
    objs = render(chart)
    entries = webhook_entries(objs)
    assert policy(objs)["drain"]["trustedUsers"] == TRUSTED
    for name in DELETES:
        assert skipped_users(entries[f"{name}.longhorn-guard.io"]) == TRUSTED, name
    # Only the delete entries skip users.
    assert [n for n, e in entries.items() if skipped_users(e) is not None] == [f"{d}.longhorn-guard.io" for d in DELETES]
    # One's own list goes to both places.
    mine = ["system:serviceaccount:longhorn-system:longhorn-service-account", "system:serviceaccount:ops:cleaner"]
    objs = render(chart, {"policy": {"drain": {"trustedUsers": mine}}})
    assert policy(objs)["drain"]["trustedUsers"] == mine
    assert all(skipped_users(webhook_entries(objs)[f"{d}.longhorn-guard.io"]) == mine for d in DELETES)
    # Nobody trusted: no condition; the InstanceManager entry then has none at all, the others
    # keep their own.
    entries = webhook_entries(render(chart, {"policy": {"drain": {"trustedUsers": []}}}))
    assert all(skipped_users(entries[f"{d}.longhorn-guard.io"]) is None for d in DELETES)
    assert "matchConditions" not in entries["instance-manager-delete.longhorn-guard.io"]
    assert [c["name"] for c in entries["pod-delete.longhorn-guard.io"]["matchConditions"]] == ["instance-manager-pod", "not-terminating"]


def test_existing_secret_is_mounted_and_its_ca_is_every_ca_bundle(chart):
    objs = render(chart, {"tls": {"existingSecret": "my-guard-tls", "caBundle": CA_PEM}})
    assert not kinds(objs, "Secret")
    vols = find(objs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert [v["secret"]["secretName"] for v in vols if "secret" in v] == ["my-guard-tls"]
    bundles = {e["clientConfig"].get("caBundle") for e in webhook_entries(objs).values()}
    assert bundles == {base64.b64encode(CA_PEM.encode()).decode()}


def test_cert_manager_injects_and_leaves_ca_bundles_empty(chart):
    objs = render(chart, {"certManager": {"enabled": True}})
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        ann = find(objs, kind)["metadata"]["annotations"]
        assert ann == {"cert-manager.io/inject-ca-from": "longhorn-guard/longhorn-guard-serving"}
    assert all("caBundle" not in e["clientConfig"] for e in webhook_entries(objs).values())
    assert "get certificate longhorn-guard-serving" in notes(chart, {"certManager": {"enabled": True}})


def test_generated_certificate_is_the_ca_bundle(chart):
    objs = render(chart)
    ca = find(objs, "Secret")["data"]["ca.crt"]
    assert {e["clientConfig"]["caBundle"] for e in webhook_entries(objs).values()} == {ca}
    assert all("annotations" not in find(objs, k)["metadata"]
               for k in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"))


def test_release_name_and_namespace_name_everything(chart):
    objs = render(chart, name="prod", namespace="guard-system")
    full = "prod-longhorn-guard"
    for obj in objs:
        meta = obj["metadata"]
        assert meta["name"].startswith(full), meta["name"]
        if obj["kind"] not in ("Role", "RoleBinding") and "namespace" in meta:
            assert meta["namespace"] == "guard-system", (obj["kind"], meta)
    for entry in webhook_entries(objs).values():
        svc = entry["clientConfig"]["service"]
        assert (svc["name"], svc["namespace"]) == (full, "guard-system")
        for expr in entry.get("namespaceSelector", {}).get("matchExpressions", []):
            if expr["operator"] == "NotIn":
                assert expr["values"] == ["guard-system", "kube-system"]
    binding = find(objs, "RoleBinding")
    assert binding["metadata"]["namespace"] == "longhorn-system"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": full, "namespace": "guard-system"}]
    pod = find(objs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == full
    assert {v["name"]: v for v in pod["volumes"]}["tls"]["secret"]["secretName"] == f"{full}-tls"
    names = [o["metadata"]["name"] for o in objs if "namespace" not in o["metadata"]]
    assert sorted(names) == [full, full, f"{full}-view", f"{full}-view"]


def test_fullname_override(chart):
    objs = render(chart, {"fullnameOverride": "guard"}, name="whatever")
    assert {o["metadata"]["name"].split("-")[0] for o in objs} == {"guard"}


def test_custom_policy_is_the_configmap_and_rolls_the_pods(chart):
    custom = {
        "drain": {
            "action": "warn",
            "denyCode": 403,
            "protectStoppedReplicas": False,
            "stallAfter": "30m",
            "maxViewAge": "10s",
            "reuseCurrentKinds": True,
            "maxListedVolumes": 10,
            "trustedUsers": ["system:serviceaccount:ops:cleaner"],
        },
        "replicas": {
            "minimum": 2,
            "action": "deny",
            "namespaceMinimums": {"prod": 3, "scratch": 1},
            "storageClassMinimums": {"longhorn-scratch": 1},
        },
        "gate": {"enabled": False, "image": "mirror.local/lg:0.1.0", "timeout": 120},
    }
    default = render(chart)
    objs = render(chart, {"policy": custom})
    assert policy(objs) == custom
    volume = lambda o: {v["name"]: v for v in find(o, "Deployment")["spec"]["template"]["spec"]["volumes"]}["policy"]
    cm = [c for c in kinds(objs, "ConfigMap") if "-policy-" in c["metadata"]["name"]][0]
    assert volume(objs)["configMap"]["name"] == cm["metadata"]["name"]
    assert volume(objs) != volume(default), "a new policy must be a new ConfigMap, rolling the pods"
    # deny without failurePolicy Fail on the replicas webhook is allowed, and pointed out.
    assert "low replica counts go through" in notes(chart, {"policy": custom})


def test_policy_keys_merge_with_the_defaults(chart):
    got = policy(render(chart, {"policy": {"drain": {"maxViewAge": "10s"}}}))
    assert got["drain"] == {"action": "enforce", "denyCode": 429, "maxViewAge": "10s", "trustedUsers": TRUSTED}
    assert got["replicas"] == {"minimum": 3, "action": "warn"}
