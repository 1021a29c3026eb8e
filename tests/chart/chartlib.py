"""The chart tests' shared helpers: render the chart with Helm's own Go SDK (helm-python-sdk,
libhelm_c), render the kustomize manifests with `kubectl kustomize`, parse both with the SDK's
YAML reader (sigs.k8s.io/yaml, as Helm and kubectl read manifests), and compare objects.

Needs kubectl with kustomize on PATH or in $KUBECTL (as tests/manifests.rs); fails, never
skips, without it.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "longhorn-guard"
MANIFESTS = ROOT / "manifests"
RELEASE = "longhorn-guard"
NAMESPACE = "longhorn-guard"
# Labels Helm charts carry and kustomize does not: release bookkeeping, not behaviour.
HELM_LABELS = (
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "helm.sh/chart",
)
# The labels manifests/base puts on its own objects (not on what overlays add).
BASE_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/part-of")
POLICY_NAME = re.compile(r"^(?P<prefix>.+-policy)-[a-z0-9]{10}$")

Obj = dict[str, Any]


def parse_stream(text: str) -> list[Obj]:
    """Every non-empty YAML document of a manifest stream, parsed."""
    docs = []
    for doc in re.split(r"^---\s*$", text, flags=re.MULTILINE):
        if doc.strip() and any(
            line.strip() and not line.lstrip().startswith("#") for line in doc.splitlines()
        ):
            docs.append(helm.values_from_yaml(doc))
    return [d for d in docs if d]


@pytest.fixture(scope="session")
def chart():
    helm.disable_logging()
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def render_files(
    chart: helm.Chart, values: Obj | None = None, *, api_versions: list[str] | None = None, **kw: Any
) -> dict[str, str]:
    """The chart's files. api_versions: what .Capabilities.APIVersions holds beyond Helm's
    defaults, as `helm template --api-versions` (the SDK's render options take them; its Python
    wrapper does not pass them on)."""
    kw.setdefault("name", RELEASE)
    kw.setdefault("namespace", NAMESPACE)
    if api_versions is None:
        return chart.render(values, is_install=True, **kw)
    from helm_python import _native
    from helm_python.chart import _dumps

    opts = {**kw, "is_install": True, "api_versions": api_versions}
    return json.loads(_native.call_string("helm_render", chart._raw(), _dumps(values), json.dumps(opts)))


def render(chart: helm.Chart, values: Obj | None = None, **kw: Any) -> list[Obj]:
    """The chart's objects (NOTES.txt left out) for these values."""
    out: list[Obj] = []
    for path, text in sorted(render_files(chart, values, **kw).items()):
        if not path.endswith("NOTES.txt"):
            out.extend(parse_stream(text))
    return out


def notes(chart: helm.Chart, values: Obj | None = None) -> str:
    files = render_files(chart, values)
    return next(text for path, text in files.items() if path.endswith("NOTES.txt"))


def kubectl() -> str:
    return os.environ.get("KUBECTL", "kubectl")


def kustomize(directory: Path) -> list[Obj]:
    try:
        out = subprocess.run(
            [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        pytest.fail(f"the chart tests need kubectl (with kustomize): `{kubectl()}` not found")
    assert out.returncode == 0, f"kubectl kustomize {directory} failed: {out.stderr}"
    return parse_stream(out.stdout)


def copy_manifests(tmp: Path) -> Path:
    """A copy of manifests/ to add generated files and kustomizations to."""
    dest = tmp / "manifests"
    shutil.copytree(MANIFESTS, dest, ignore=shutil.ignore_patterns("tls"))
    return dest


def overlay(manifests: Path, name: str, resources: list[str], components: list[str]) -> Path:
    """A kustomization of one's own under the manifests copy: RESOURCES and COMPONENTS (paths
    relative to it), as docs/install.md tells users to add a component."""
    mine = manifests / name
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(
        json.dumps(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": resources,
                "components": components,
            }
        )
    )
    return mine


def write_dev_certs(manifests: Path, secret: Obj) -> None:
    """The dev-certs overlay's tls/ files (as `make manifests` writes them), from a Secret."""
    tls = manifests / "overlays" / "dev-certs" / "tls"
    tls.mkdir(parents=True, exist_ok=True)
    for key in ("ca.crt", "tls.crt", "tls.key"):
        (tls / key).write_bytes(base64.b64decode(secret["data"][key]))


def find(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"want one {kind} {name or ''}, got {[o['metadata']['name'] for o in hits]}"
    return hits[0]


def kinds(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def key(obj: Obj) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def base_policy() -> Obj:
    """manifests/base/policy.yaml, parsed: the policy kustomize installs."""
    return helm.values_from_yaml((MANIFESTS / "base" / "policy.yaml").read_text())


def policy_text(objs: list[Obj]) -> str:
    cms = [o for o in kinds(objs, "ConfigMap") if POLICY_NAME.match(o["metadata"]["name"])]
    assert len(cms) == 1, [o["metadata"]["name"] for o in cms]
    return cms[0]["data"]["policy.yaml"]


def normalize(objs: list[Obj], *, chart_side: bool, unlabelled: set[tuple[str, str, str]]) -> dict:
    """Objects by (kind, namespace, name), made comparable:
    - the chart's Helm bookkeeping labels are dropped, and on objects kustomize renders
      without the base's two labels (what overlays and components add) those as well;
    - the policy ConfigMap's hashed name becomes "<prefix>-<hash>" (in the Deployment's volume
      too) and its policy.yaml is compared parsed: the base's file has comments, the chart
      writes its values out with toYaml. Both hashes are checked elsewhere;
    - base64 in Secret data and caBundles is compared without line breaks (kustomize wraps
      it at 70 columns; base64 decoding skips them).
    """
    out = {}
    for obj in copy.deepcopy(objs):
        meta = obj["metadata"]
        labels = meta.get("labels", {})
        if chart_side:
            for label in HELM_LABELS:
                labels.pop(label, None)
            if key(obj) in unlabelled:
                for label in BASE_LABELS:
                    labels.pop(label, None)
        if "labels" in meta and not labels:
            del meta["labels"]
        match = POLICY_NAME.match(meta["name"])
        if obj["kind"] == "ConfigMap" and match:
            meta["name"] = match["prefix"] + "-<hash>"
            obj["data"]["policy.yaml"] = helm.values_from_yaml(obj["data"]["policy.yaml"])
        if obj["kind"] == "Secret":
            obj["data"] = {k: v.replace("\n", "") for k, v in obj.get("data", {}).items()}
        for entry in obj.get("webhooks", []):
            if "caBundle" in entry["clientConfig"]:
                entry["clientConfig"]["caBundle"] = entry["clientConfig"]["caBundle"].replace("\n", "")
        if obj["kind"] == "Deployment":
            for vol in obj["spec"]["template"]["spec"]["volumes"]:
                cm = vol.get("configMap")
                if cm and POLICY_NAME.match(cm["name"]):
                    cm["name"] = POLICY_NAME.match(cm["name"])["prefix"] + "-<hash>"
        out[key(obj)] = obj
    return out


def assert_same_objects(chart_objs: list[Obj], kustomize_objs: list[Obj], *, except_keys=()) -> None:
    """The chart renders exactly kustomize's objects (less except_keys), field for field."""
    unlabelled = {
        key(o) for o in kustomize_objs if not set(BASE_LABELS) & set(o["metadata"].get("labels", {}))
    }
    want = normalize(kustomize_objs, chart_side=False, unlabelled=unlabelled)
    got = normalize(chart_objs, chart_side=True, unlabelled=unlabelled)
    for k in except_keys:
        assert k in want, f"{k} is not in the kustomize output"
        del want[k]
    assert sorted(got) == sorted(want), (
        f"only in the chart: {sorted(set(got) - set(want))}; "
        f"only in kustomize: {sorted(set(want) - set(got))}"
    )
    for k in want:
        assert got[k] == want[k], (
            f"{k} differs\nchart:     {json.dumps(got[k], sort_keys=True)}\n"
            f"kustomize: {json.dumps(want[k], sort_keys=True)}"
        )


def webhook_entries(objs: list[Obj]) -> dict[str, Obj]:
    """Every webhook entry of both configurations, by name."""
    out = {}
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for conf in kinds(objs, kind):
            for entry in conf["webhooks"]:
                out[entry["name"]] = entry
    return out


def container(objs: list[Obj]) -> Obj:
    return find(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
