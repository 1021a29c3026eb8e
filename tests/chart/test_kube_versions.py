"""The chart on each Kubernetes version: which init gate `initGate.via: auto` picks from what a
real kube-apiserver serves, and the kubeVersion floor Helm enforces before it creates anything.

data/discovery-*.json hold the group admissionregistration.k8s.io as real kube-apiservers of
1.33-1.36 serve it, with their default flags and with the MutatingAdmissionPolicy alpha or beta
switched on (data/capture-discovery.sh; the file's "flags"). Helm builds
.Capabilities.APIVersions from exactly that: each served group/version, and group/version/Kind
for each of its resources.
"""

from __future__ import annotations

import base64
import http.server
import json
import re
import ssl
import subprocess
import threading
from pathlib import Path

import helm_python as helm
import pytest

from chartlib import CHART, NAMESPACE, RELEASE, kinds, render

DATA = Path(__file__).parent / "data"
SNAPSHOTS = sorted(DATA.glob("discovery-*.json"))
GROUP = "admissionregistration.k8s.io"
FLOOR = (1, 33)


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def minor(snapshot: dict) -> int:
    return int(re.match(r"\d+", snapshot["version"]["minor"])[0])


def helm_api_versions(snapshot: dict) -> list[str]:
    """What Helm's GetVersionSet adds for the group: "group/version" for each served version
    and "group/version/Kind" for each resource of it."""
    out = set()
    for version in snapshot["group"]["versions"]:
        gv = version["groupVersion"]
        out.add(gv)
        out.update(f"{gv}/{r['kind']}" for r in snapshot["resources"][gv]["resources"])
    return sorted(out)


def served(snapshot: dict, kind: str) -> list[str]:
    """The group/versions that serve KIND."""
    return sorted(gv for gv, res in snapshot["resources"].items() if any(r["kind"] == kind for r in res["resources"]))


def test_snapshots_cover_every_supported_minor_and_a_prerelease_policy_api():
    snaps = [load(p) for p in SNAPSHOTS]
    assert {minor(s) for s in snaps} == {33, 34, 35, 36}
    # What the docs state, as the servers served it: v1 MutatingAdmissionPolicy from 1.36 only;
    # ValidatingAdmissionPolicy and the webhook configurations in v1 on every supported minor.
    for s in snaps:
        assert (f"{GROUP}/v1" in served(s, "MutatingAdmissionPolicy")) == (minor(s) >= 36), s["version"]["gitVersion"]
        assert f"{GROUP}/v1" in served(s, "ValidatingAdmissionPolicy"), s["version"]["gitVersion"]
        assert f"{GROUP}/v1" in served(s, "MutatingWebhookConfiguration"), s["version"]["gitVersion"]
    # The case `auto` must not fall for: the policy served, but only as alpha or beta.
    prerelease = {
        gv.rsplit("/", 1)[1]
        for s in snaps
        if f"{GROUP}/v1" not in served(s, "MutatingAdmissionPolicy")
        for gv in served(s, "MutatingAdmissionPolicy")
    }
    assert prerelease == {"v1alpha1", "v1beta1"}


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.stem.removeprefix("discovery-"))
def test_auto_picks_the_gate_form_the_api_server_serves_in_v1(chart, path):
    snapshot = load(path)
    objs = render(chart, api_versions=helm_api_versions(snapshot))
    entries = [w["name"] for o in kinds(objs, "MutatingWebhookConfiguration") for w in o["webhooks"]]
    policies = kinds(objs, "MutatingAdmissionPolicy") + kinds(objs, "MutatingAdmissionPolicyBinding")
    if f"{GROUP}/v1" in served(snapshot, "MutatingAdmissionPolicy"):
        assert [(o["apiVersion"], o["kind"]) for o in policies] == [
            (f"{GROUP}/v1", "MutatingAdmissionPolicy"),
            (f"{GROUP}/v1", "MutatingAdmissionPolicyBinding"),
        ]
        assert entries == []
    else:
        assert policies == []
        assert entries == ["init-gate.longhorn-guard.io"]
    # The replica-count ValidatingAdmissionPolicy, when asked for, is v1 on every supported minor.
    vap = render(chart, {"replicasPolicy": {"enabled": True}}, api_versions=helm_api_versions(snapshot))
    assert {o["apiVersion"] for o in kinds(vap, "ValidatingAdmissionPolicy")} == {f"{GROUP}/v1"}


def test_chart_floor_is_the_documented_one():
    meta = helm.values_from_yaml((CHART / "Chart.yaml").read_text())
    assert meta["kubeVersion"] == f">={FLOOR[0]}.{FLOOR[1]}.0-0"


def resource(name: str, kind: str, *, namespaced: bool) -> dict:
    """One entry of an APIResourceList."""
    return {"name": name, "singularName": name[:-1], "namespaced": namespaced, "kind": kind,
            "verbs": ["create", "get", "list"]}


class FakeAPIServer:
    """Just enough of an API server over TLS on 127.0.0.1 (port 0) for `helm install` to get as
    far as it goes: /version says VERSION, discovery lists namespaces and secrets, GETs of the
    release's Secrets find none, and every write is refused with 403. Records each request."""

    def __init__(self, tmp: Path):
        self.version: dict = {}
        self.requests: list[tuple[str, str]] = []
        cert, key = tmp / "tls.crt", tmp / "tls.key"
        try:
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                 "-keyout", str(key), "-out", str(cert)],
                check=True, capture_output=True)
        except FileNotFoundError:
            pytest.fail("the chart tests need openssl for the fake API server's certificate")
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def handle_any(self):
                fake.requests.append((self.command, self.path))
                path = self.path.split("?")[0]
                if self.command != "GET":
                    self.reply(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403,
                                     "reason": "Forbidden", "message": "the fake API server takes no writes"})
                elif path == "/version":
                    self.reply(200, fake.version)
                elif path == "/api":
                    self.reply(200, {"kind": "APIVersions", "versions": ["v1"]})
                elif path == "/apis":
                    self.reply(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
                elif path == "/api/v1":
                    self.reply(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": [
                        resource("namespaces", "Namespace", namespaced=False),
                        resource("secrets", "Secret", namespaced=True),
                    ]})
                elif path == f"/api/v1/namespaces/{NAMESPACE}/secrets":
                    self.reply(200, {"kind": "SecretList", "apiVersion": "v1", "metadata": {}, "items": []})
                else:
                    self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                                     "reason": "NotFound"})

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        ca = base64.b64encode(cert.read_bytes()).decode()
        self.kubeconfig = json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {
                "server": f"https://127.0.0.1:{self.server.server_address[1]}", "certificate-authority-data": ca}}],
            "users": [{"name": "fake", "user": {"token": "fake"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        })

    def install(self, git_version: str) -> str:
        """`helm install` with the chart's defaults against a server of GIT_VERSION: Helm's error."""
        major, minor_ = re.match(r"v(\d+)\.(\d+)", git_version).groups()
        self.version = {**load(SNAPSHOTS[0])["version"], "major": major, "minor": minor_, "gitVersion": git_version}
        self.requests.clear()
        with helm.Config(kubeconfig_content=self.kubeconfig, namespace=NAMESPACE) as cfg:
            with pytest.raises(helm.HelmError) as err:
                cfg.install(CHART, RELEASE, None, namespace=NAMESPACE, create_namespace=True)
        return str(err.value)


@pytest.fixture(scope="module")
def fake_api(tmp_path_factory):
    helm.disable_logging()
    fake = FakeAPIServer(tmp_path_factory.mktemp("fake-api"))
    yield fake
    fake.server.shutdown()


@pytest.mark.parametrize("version", ["v1.32.6", "v1.30.0", "v1.27.3-eks-1234", "v1.32.9-gke.1001000"])
def test_below_the_floor_helm_refuses_before_anything_is_created(fake_api, version):
    err = fake_api.install(version)
    floor = f">={FLOOR[0]}.{FLOOR[1]}.0-0"
    assert err == f"chart requires kubeVersion: {floor} which is incompatible with Kubernetes {version}"
    # Only reads, and not even the template's lookup of the TLS Secret: nothing was rendered.
    assert {method for method, _ in fake_api.requests} == {"GET"}
    assert not [p for _, p in fake_api.requests if p.startswith(f"/api/v1/namespaces/{NAMESPACE}/secrets/")]


@pytest.mark.parametrize("version", ["v1.33.0", "v1.33.4", "v1.33.5-eks-3025e55", "v1.34.2-gke.1001000", "v1.36.2"])
def test_from_the_floor_on_helm_goes_on_to_render_and_install(fake_api, version):
    err = fake_api.install(version)
    assert "kubeVersion" not in err, err
    # It rendered: the chart's lookup of its TLS Secret reached the server.
    assert ("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets/{RELEASE}-tls") in fake_api.requests
