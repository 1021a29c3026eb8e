"""values.schema.json refuses unknown keys and mistyped or out-of-range values, with the key's
path and the reason in the message, before anything is rendered; `helm lint` is clean."""

from __future__ import annotations

import json
import re

import helm_python as helm
import pytest

from chartlib import CHART, render

PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"

REFUSED = [
    # (values, the path in the message, the reason in the message)
    ({"replica": 2}, "", "additional properties 'replica' not allowed"),
    ({"image": {"pullpolicy": "Always"}}, "/image", "additional properties 'pullpolicy' not allowed"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy", "value must be one of"),
    ({"image": {"digest": "sha256:abc"}}, "/image/digest", "does not match pattern"),
    ({"replicas": "two"}, "/replicas", "got string, want integer"),
    ({"replicas": 0}, "/replicas", "minimum: got 0, want 1"),
    ({"resources": {"requests": {"cpu": ["1"]}}}, "/resources/requests/cpu", "got array"),
    ({"tolerations": {"key": "x"}}, "/tolerations", "got object, want array"),
    ({"nodeSelector": {"zone": 1}}, "/nodeSelector/zone", "got number, want string"),
    ({"serve": {"args": ["--listen=0.0.0.0:9443"]}}, "/serve", "additional properties 'args' not allowed"),
    ({"serve": {"requestTimeout": "8"}}, "/serve/requestTimeout", "does not match pattern"),
    ({"serve": {"maxBodyBytes": 0}}, "/serve/maxBodyBytes", "minimum: got 0, want 1"),
    ({"serve": {"maxBodyBytes": 67108865}}, "/serve/maxBodyBytes", "maximum: got"),
    ({"serve": {"maxConnections": 1.5}}, "/serve/maxConnections", "want null or integer"),
    ({"serve": {"logFormat": "yaml"}}, "/serve/logFormat", "value must be one of"),
    ({"policy": {"drain": {"maxviewage": "5s"}}}, "/policy/drain", "additional properties 'maxviewage' not allowed"),
    ({"policy": {"drain": {"action": "block"}}}, "/policy/drain/action", "value must be one of"),
    ({"policy": {"drain": {"denyCode": 200}}}, "/policy/drain/denyCode", "minimum: got 200, want 400"),
    ({"policy": {"drain": {"stallAfter": "ten minutes"}}}, "/policy/drain/stallAfter", "does not match pattern"),
    ({"policy": {"replicas": {"minimum": 21}}}, "/policy/replicas/minimum", "maximum: got 21, want 20"),
    ({"policy": {"replicas": {"namespaceMinimums": {"prod": 0}}}}, "/policy/replicas/namespaceMinimums/prod", "minimum"),
    ({"policy": {"gate": {"enabled": "yes"}}}, "/policy/gate/enabled", "got string, want boolean"),
    ({"policy": {"audit": {}}}, "/policy", "additional properties 'audit' not allowed"),
    ({"webhooks": {"nodeCordon": {"failurePolicy": "Never"}}}, "/webhooks/nodeCordon/failurePolicy", "value must be one of"),
    ({"webhooks": {"nodeDelete": {"timeoutSeconds": 31}}}, "/webhooks/nodeDelete/timeoutSeconds", "maximum: got 31, want 30"),
    ({"webhooks": {"initGate": {"timeoutSeconds": 0}}}, "/webhooks/initGate/timeoutSeconds", "minimum: got 0, want 1"),
    ({"webhooks": {"drainEviction": {"failurePolicy": "Ignore"}}}, "/webhooks/drainEviction/ignoreWhileDown", "value must be true"),
    ({"webhooks": {"extra": {}}}, "/webhooks", "additional properties 'extra' not allowed"),
    ({"tls": {"existingSecret": "mine"}}, "/tls/caBundle", "minLength: got 0, want 1"),
    ({"tls": {"existingSecret": "mine", "caBundle": "not a certificate"}}, "/tls/caBundle", "does not match pattern"),
    ({"tls": {"existingSecret": "mine", "caBundle": PEM}, "certManager": {"enabled": True}}, "/certManager/enabled", "value must be false"),
    ({"tls": {"existingSecret": "Not_A_Name", "caBundle": PEM}}, "/tls/existingSecret", "does not match pattern"),
    ({"certManager": {"issuerRef": {"kind": "ClusterIssuer"}}}, "/certManager/issuerRef", "properties 'name' required"),
    ({"certManager": {"enabled": "true"}}, "/certManager/enabled", "got string, want boolean"),
    ({"monitoring": {"serviceMonitor": {"enabled": True, "interval": "30s"}}}, "/monitoring/serviceMonitor", "additional properties 'interval' not allowed"),
    ({"fullnameOverride": "Guard"}, "/fullnameOverride", "does not match pattern"),
]


@pytest.mark.parametrize("values, path, reason", REFUSED, ids=[json.dumps(v)[:60] for v, _, _ in REFUSED])
def test_bad_values_are_refused_with_the_key_and_the_reason(chart, values, path, reason):
    with pytest.raises(helm.HelmValuesError) as err:
        render(chart, values)
    message = str(err.value)
    assert "values don't meet the specifications of the schema" in message, message
    assert re.search(rf"at '{re.escape(path)}': .*{re.escape(reason)}", message), message
    # validate_schema (what install and upgrade run) says the same.
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema(chart.merge_values(values))


ACCEPTED = [
    {"webhooks": {"drainEviction": {"failurePolicy": "Ignore", "ignoreWhileDown": True}}},
    {"tls": {"existingSecret": "my-tls", "caBundle": PEM}},
    {"certManager": {"enabled": True, "issuerRef": {"kind": "ClusterIssuer", "name": "corp"}}},
    {"policy": {"drain": {"stallAfter": 600, "maxViewAge": "1m30s"}, "gate": {"timeout": "500ms"}}},
    {"serve": {"checkInterval": "0s", "freshnessProbeInterval": "0s", "maxBodyBytes": 67108864}},
    {"image": {"digest": "sha256:" + "0" * 64}},
]


@pytest.mark.parametrize("values", ACCEPTED, ids=[json.dumps(v)[:60] for v in ACCEPTED])
def test_good_values_pass(chart, values):
    assert render(chart, values)


def test_every_key_of_values_yaml_is_in_the_schema_and_documented(chart):
    """The schema names every default key (additionalProperties false all the way down), and
    in values.yaml a comment stands above each top-level key and each key of the flat
    sections (one comment line per key: `helm show values` is the reference)."""
    schema = chart.schema

    def walk(values, node, path):
        for k, v in values.items():
            props = node.get("properties", {})
            assert k in props, f"{path}{k} is not in values.schema.json"
            if isinstance(v, dict) and props[k].get("additionalProperties") is False:
                walk(v, props[k], f"{path}{k}.")

    walk(chart.values, schema, "")
    lines = (CHART / "values.yaml").read_text().splitlines()
    section = ""
    for i, line in enumerate(lines):
        top = re.match(r"^([A-Za-z]\w*):", line)
        child = re.match(r"^  ([A-Za-z]\w*):", line)
        if top:
            section = top[1]
        if top or (child and section in ("image", "serve", "tls", "certManager")):
            assert lines[i - 1].lstrip().startswith("#"), f"values.yaml:{i + 1}: {line.strip()} has no comment"


def test_lint_is_clean():
    for values in (None, {"certManager": {"enabled": True}}, {"replicas": 1}):
        report = helm.lint(CHART, values, strict=True, namespace="longhorn-guard", kube_version="v1.33.0")
        assert report["errors"] == [], report
        # Severity 2 is a warning, 3 an error; only infos (the missing icon) may stay.
        assert [m for m in report["messages"] if m["severity"] >= 2] == [], report
        assert all(m["error"] == "icon is recommended" for m in report["messages"]), report
