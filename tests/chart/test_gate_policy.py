"""The init gate as a MutatingAdmissionPolicy (initGate.via): the chart renders the objects of
manifests/components/gate-policy (which `longhorn-guard gate-policy` renders; tests/gate_policy.rs
checks that) in place of the mutating webhook, chooses it by the API server's capabilities, and
puts the values' gate image and timeout into its variables, written as the webhook writes them."""

from __future__ import annotations

import json

from chartlib import (
    ROOT,
    assert_same_objects,
    copy_manifests,
    find,
    kinds,
    kustomize,
    overlay,
    render,
    write_dev_certs,
)

MAP = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"
NS_KEY = ("Namespace", "", "longhorn-guard")


def variables(objs) -> dict[str, str]:
    policy = find(objs, "MutatingAdmissionPolicy")
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


def test_policy_is_the_gate_policy_component(chart, tmp_path):
    objs = render(chart, {"initGate": {"via": "policy"}})
    manifests = copy_manifests(tmp_path)
    write_dev_certs(manifests, find(objs, "Secret"))
    mine = overlay(manifests, "with-gate-policy", ["../overlays/dev-certs"], ["../components/gate-policy"])
    want = kustomize(mine)
    assert not kinds(want, "MutatingWebhookConfiguration"), "the component removes the webhook"
    assert_same_objects(objs, want, except_keys=[NS_KEY])


def test_cert_manager_overlay_with_the_component(chart, tmp_path):
    objs = render(chart, {"initGate": {"via": "policy"}, "certManager": {"enabled": True}})
    manifests = copy_manifests(tmp_path)
    mine = overlay(manifests, "cm-gate-policy", ["../overlays/cert-manager"], ["../components/gate-policy"])
    assert_same_objects(objs, kustomize(mine), except_keys=[NS_KEY])


def test_default_follows_the_api_servers_capabilities(chart):
    with_map = render(chart, api_versions=[MAP])
    assert [o["metadata"]["name"] for o in kinds(with_map, "MutatingAdmissionPolicy")] == ["longhorn-guard-gate"]
    assert find(with_map, "MutatingAdmissionPolicyBinding")["spec"]["policyName"] == "longhorn-guard-gate"
    assert not kinds(with_map, "MutatingWebhookConfiguration")
    without = render(chart, api_versions=["admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy"])
    assert not kinds(without, "MutatingAdmissionPolicy") and not kinds(without, "MutatingAdmissionPolicyBinding")
    assert [e["name"] for e in find(without, "MutatingWebhookConfiguration")["webhooks"]] == [
        "init-gate.longhorn-guard.io"
    ]
    # Helm's own defaults (no cluster): no v1 MutatingAdmissionPolicy, the webhook.
    assert kinds(render(chart), "MutatingWebhookConfiguration")


def test_via_set_wins_over_the_capabilities(chart):
    objs = render(chart, {"initGate": {"via": "webhook"}}, api_versions=[MAP])
    assert kinds(objs, "MutatingWebhookConfiguration") and not kinds(objs, "MutatingAdmissionPolicy")
    objs = render(chart, {"initGate": {"via": "policy"}})
    assert kinds(objs, "MutatingAdmissionPolicy") and not kinds(objs, "MutatingWebhookConfiguration")


def test_disabled_gate_has_neither(chart):
    objs = render(chart, {"policy": {"gate": {"enabled": False}}}, api_versions=[MAP])
    assert not kinds(objs, "MutatingAdmissionPolicy") and not kinds(objs, "MutatingWebhookConfiguration")


def test_release_names_the_policy_and_its_binding(chart):
    objs = render(chart, {"initGate": {"via": "policy"}}, name="guard", namespace="guard-system")
    policy = find(objs, "MutatingAdmissionPolicy")
    assert policy["metadata"]["name"] == "guard-longhorn-guard-gate"
    assert find(objs, "MutatingAdmissionPolicyBinding")["spec"]["policyName"] == "guard-longhorn-guard-gate"


def test_gate_image_is_the_servers_unless_set(chart):
    objs = render(chart, {"initGate": {"via": "policy"}, "image": {"tag": "9.9.9"}})
    assert variables(objs)["image"] == json.dumps("ghcr.io/longhorn-guard/longhorn-guard:9.9.9")
    objs = render(chart, {"initGate": {"via": "policy"}, "policy": {"gate": {"image": "mirror.local/g:1"}}})
    assert variables(objs)["image"] == json.dumps("mirror.local/g:1")


def test_gate_timeout_is_written_as_the_webhook_writes_it(chart):
    # The same table tests/gate_policy.rs checks against the webhook's own writing.
    table = json.loads((ROOT / "tests" / "data" / "gate-timeouts.json").read_text())
    cases = list(table.items()) + [(90, "1m30s"), (3600, "1h")]
    for given, want in cases:
        objs = render(chart, {"initGate": {"via": "policy"}, "policy": {"gate": {"timeout": given}}})
        assert variables(objs)["timeout"] == json.dumps(want), given


def test_replicas_policy_is_the_replicas_policy_component(chart, tmp_path):
    objs = render(chart, {"replicasPolicy": {"enabled": True}})
    manifests = copy_manifests(tmp_path)
    write_dev_certs(manifests, find(objs, "Secret"))
    mine = overlay(manifests, "with-replicas-policy", ["../overlays/dev-certs"], ["../components/replicas-policy"])
    assert_same_objects(objs, kustomize(mine), except_keys=[NS_KEY])


def test_replicas_policy_takes_the_values_minimums_and_action(chart):
    assert not kinds(render(chart), "ValidatingAdmissionPolicy")
    values = {
        "replicasPolicy": {"enabled": True},
        "policy": {
            "replicas": {
                "minimum": 4,
                "action": "deny",
                "storageClassMinimums": {"fast": 2},
                "namespaceMinimums": {"dev": 1},
            }
        },
    }
    objs = render(chart, values, name="guard", namespace="guard-system")
    name = "guard-longhorn-guard-replicas"
    binding = find(objs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["policyName"] == find(objs, "ValidatingAdmissionPolicy")["metadata"]["name"] == name
    assert binding["spec"]["paramRef"] == {"name": name, "namespace": "guard-system", "parameterNotFoundAction": "Allow"}
    params = find(objs, "ConfigMap", name)
    assert params["metadata"]["namespace"] == "guard-system"
    # As `longhorn-guard replicas-policy` writes them (tests/gate_policy.rs, the same policy).
    assert params["data"] == {"minimum": "4", "storageClass.fast": "2", "namespace.dev": "1"}
