"""The chart and the kustomize manifests render the same objects: the defaults against
manifests/base (with the dev-certs overlay for the generated certificate), certManager against
overlays/cert-manager, monitoring against components/monitoring. One object differs by
design: the chart creates no Namespace (Helm installs into one: --create-namespace)."""

from __future__ import annotations

import base64
import subprocess
import textwrap

from chartlib import (
    NAMESPACE,
    assert_same_objects,
    base_policy,
    copy_manifests,
    find,
    kinds,
    kustomize,
    overlay,
    policy_text,
    render,
    webhook_entries,
    write_dev_certs,
    MANIFESTS,
)

NS_KEY = ("Namespace", "", NAMESPACE)


def test_defaults_are_the_base_with_the_dev_certs_overlay(chart, tmp_path):
    objs = render(chart)
    # The chart's generated pair, given to the dev-certs overlay as `make manifests` would.
    manifests = copy_manifests(tmp_path)
    write_dev_certs(manifests, find(objs, "Secret"))
    want = kustomize(manifests / "overlays" / "dev-certs")
    assert_same_objects(objs, want, except_keys=[NS_KEY])


def test_defaults_without_the_secret_and_ca_bundles_are_the_base(chart):
    objs = [o for o in render(chart) if o["kind"] != "Secret"]
    for conf in objs:
        for entry in conf.get("webhooks", []):
            del entry["clientConfig"]["caBundle"]
    assert_same_objects(objs, kustomize(MANIFESTS / "base"), except_keys=[NS_KEY])


def test_the_delete_entries_are_in_both_and_skip_the_policys_trusted_users(chart):
    """The entries of issue 44 are rendered by both (the comparisons above then hold them
    equal), and the base's static matchConditions list exactly the users its policy file
    trusts: kustomize has no template to keep the two files in step, this test does."""
    names = ("pod-delete", "instance-manager-delete", "budget-delete")
    chart_entries = webhook_entries(render(chart))
    base_entries = webhook_entries(kustomize(MANIFESTS / "base"))
    trusted = base_policy()["drain"]["trustedUsers"]
    want = "!(request.userInfo.username in [" + ", ".join(f"'{u}'" for u in trusted) + "])"
    for name in names:
        full = f"{name}.longhorn-guard.io"
        assert full in chart_entries and full in base_entries, full
        conditions = {c["name"]: c["expression"] for c in base_entries[full]["matchConditions"]}
        assert conditions["not-a-trusted-user"] == want, full


def test_cert_manager_is_the_cert_manager_overlay(chart):
    objs = render(chart, {"certManager": {"enabled": True}})
    assert not kinds(objs, "Secret"), "cert-manager writes the Secret, the chart must not"
    assert_same_objects(objs, kustomize(MANIFESTS / "overlays" / "cert-manager"), except_keys=[NS_KEY])


def test_cert_manager_with_an_issuer_of_ones_own(chart):
    issuer = {"kind": "ClusterIssuer", "name": "corp-ca", "group": "cert-manager.io"}
    objs = render(chart, {"certManager": {"enabled": True, "issuerRef": issuer}})
    assert [o["metadata"]["name"] for o in kinds(objs, "Certificate")] == ["longhorn-guard-serving"]
    assert not kinds(objs, "Issuer")
    assert find(objs, "Certificate")["spec"]["issuerRef"] == issuer


def test_monitoring_is_the_monitoring_component(chart, tmp_path):
    objs = render(
        chart,
        {"monitoring": {k: {"enabled": True} for k in ("serviceMonitor", "prometheusRule", "dashboard")}},
    )
    manifests = copy_manifests(tmp_path)
    write_dev_certs(manifests, find(objs, "Secret"))
    mine = overlay(manifests, "with-monitoring", ["../overlays/dev-certs"], ["../components/monitoring"])
    assert_same_objects(objs, kustomize(mine), except_keys=[NS_KEY])


def test_monitoring_labels_and_dashboard_namespace(chart):
    objs = render(
        chart,
        {
            "monitoring": {
                "serviceMonitor": {"enabled": True, "labels": {"release": "kps"}},
                "prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
                "dashboard": {"enabled": True, "namespace": "monitoring"},
            }
        },
    )
    assert find(objs, "ServiceMonitor")["metadata"]["labels"]["release"] == "kps"
    assert find(objs, "PrometheusRule")["metadata"]["labels"]["release"] == "kps"
    dashboard = find(objs, "ConfigMap", "longhorn-guard-dashboard")
    assert dashboard["metadata"]["namespace"] == "monitoring"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_monitoring_is_off_by_default(chart):
    objs = render(chart)
    assert not kinds(objs, "ServiceMonitor") and not kinds(objs, "PrometheusRule")
    assert not [o for o in kinds(objs, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]


def kustomize_policy_name(tmp_path, text: str) -> str:
    """The name kustomize's configMapGenerator gives a policy ConfigMap holding TEXT."""
    (tmp_path / "policy.yaml").write_text(text)
    (tmp_path / "kustomization.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: kustomize.config.k8s.io/v1beta1
            kind: Kustomization
            configMapGenerator:
              - name: longhorn-guard-policy
                files:
                  - policy.yaml
            """
        )
    )
    return find(kustomize(tmp_path), "ConfigMap")["metadata"]["name"]


def test_policy_configmap_is_named_by_kustomizes_hash(chart, tmp_path):
    for i, values in enumerate([None, {"policy": {"drain": {"action": "warn"}, "replicas": {"minimum": 2}}}]):
        objs = render(chart, values)
        text = policy_text(objs)
        name = [o for o in kinds(objs, "ConfigMap")][0]["metadata"]["name"]
        d = tmp_path / str(i)
        d.mkdir()
        assert name == kustomize_policy_name(d, text)


def test_prometheus_templates_are_not_expanded_by_helm(chart):
    rule = find(render(chart, {"monitoring": {"prometheusRule": {"enabled": True}}}), "PrometheusRule")
    descriptions = [r["annotations"]["description"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert any("{{ $value }}" in d for d in descriptions), descriptions


def test_generated_certificate_serves_the_service_name(chart, tmp_path):
    secret = find(render(chart, name="guard", namespace="guard-system"), "Secret")
    files = {}
    for k in ("ca.crt", "tls.crt", "tls.key"):
        files[k] = tmp_path / k
        files[k].write_bytes(base64.b64decode(secret["data"][k]))

    def openssl(*args: str) -> str:
        out = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
        assert out.returncode == 0, f"openssl {' '.join(args)}: {out.stderr}"
        return out.stdout

    assert "OK" in openssl("verify", "-CAfile", str(files["ca.crt"]), "-purpose", "sslserver", str(files["tls.crt"]))
    text = openssl("x509", "-in", str(files["tls.crt"]), "-noout", "-text")
    want = "guard-longhorn-guard.guard-system.svc"
    assert f"DNS:{want}" in text and f"DNS:{want}.cluster.local" in text, text
    # The key is the certificate's: same public key.
    pub_cert = openssl("x509", "-in", str(files["tls.crt"]), "-noout", "-pubkey")
    pub_key = openssl("pkey", "-in", str(files["tls.key"]), "-pubout")
    assert pub_cert == pub_key
