"""Install, upgrade and uninstall charts/longhorn-guard for real, with Helm's Go SDK
(helm-python-sdk), against the cluster a kubeconfig names. Run by e2e/cluster-helm.sh.

  install    release deployed, every object of its manifest in the cluster; with kubelets:
             the pods Ready, /metrics of each pod (API server proxy), a dry-run eviction of an
             instance-manager pod answered by the webhook (its admission counter moves)
  upgrade    a changed policy: a new policy ConfigMap, the old one gone, the generated
             certificate kept (lookup); with kubelets: every pod replaced, and dry-run
             evictions sent all along the upgrade, none failing
  uninstall  nothing of the release left: no object labelled with it, no webhook
             configuration with a longhorn-guard.io entry, no release record, no pod; then the
             namespace Helm created is deleted too

After the install it also checks the init gate's form (initGate.via auto): the
MutatingAdmissionPolicy where the API server serves admissionregistration.k8s.io/v1
MutatingAdmissionPolicy, else the mutating webhook, never both. On an API server older than
the chart's kubeVersion floor the install must be refused by Helm, naming the floor, with
nothing created: that is the whole run there.

Without a Ready Node (a bare kube-apiserver) the pod and review checks are skipped and say so.
Reviews are only sent once the Service's ClusterIP is routed to a local device: an API server
dials that address, and by the default route the connection would leave this machine.
Prints one ok/FAIL line per check and `N passed, N failed`; exit 1 if a check failed, 2 if it
could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import helm_python as helm

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "longhorn-guard"
CRDS = Path(os.environ.get("E2E_CRDS", ROOT.parent / "shared" / "fixtures" / "crds" / "longhorn-crds.yaml"))
LH_NS = "longhorn-system"
PROBE_POD = "instance-manager-helm-e2e"


class Run:
    def __init__(self, kubeconfig: str, release: str, namespace: str):
        self.kubeconfig, self.release, self.ns = kubeconfig, release, namespace
        self.passed = self.failed = 0

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""))
        self.passed += ok
        self.failed += not ok
        return ok

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        cmd = [os.environ.get("KUBECTL", "kubectl"), "--kubeconfig", self.kubeconfig, "--request-timeout=30s", *args]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)

    def get_json(self, *args: str):
        out = self.kubectl("get", *args, "-o", "json")
        return json.loads(out.stdout) if out.returncode == 0 else None


def die(msg: str) -> None:
    print(f"cluster-helm: {msg}", file=sys.stderr)
    sys.exit(2)


def log(msg: str) -> None:
    print(f"\n== {msg}", flush=True)


def objects(manifest: str) -> list[dict]:
    docs = [d for d in re.split(r"^---\s*$", manifest, flags=re.MULTILINE) if d.strip()]
    return [o for o in (helm.values_from_yaml(d) for d in docs) if o]


def fullname(release: str) -> str:
    """The chart's object names for RELEASE (templates/_helpers.tpl)."""
    return release if "longhorn-guard" in release else f"{release}-longhorn-guard"


def ready_nodes(run: Run) -> int:
    nodes = run.get_json("nodes") or {"items": []}
    return sum(
        any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
        for n in nodes["items"]
    )


def routed_locally(address: str) -> bool:
    """True when ADDRESS would leave by a device other than the default route's."""
    default = subprocess.run(["ip", "route", "show", "default"], capture_output=True, text=True).stdout.split()
    via = subprocess.run(["ip", "route", "get", address], capture_output=True, text=True).stdout.split()
    dev = lambda words: words[words.index("dev") + 1] if "dev" in words else None
    return bool(via) and dev(via) is not None and dev(via) != dev(default)


def evict(run: Run) -> tuple[str, str]:
    """A dry-run eviction of an instance-manager pod name no pod has: ('answered'|'failed',
    message). The API server calls the webhooks before it looks the pod up, so an allow ends
    in NotFound and a denial in the webhook's message; anything else (`failed calling webhook`,
    a timeout, a 5xx) is a failed review."""
    body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                       "metadata": {"name": PROBE_POD, "namespace": LH_NS}})
    out = run.kubectl("create", "--raw", f"/api/v1/namespaces/{LH_NS}/pods/{PROBE_POD}/eviction?dryRun=All",
                      "-f", "-", stdin=body)
    text = (out.stdout + out.stderr).strip()
    if out.returncode == 0 or "denied the request" in text or f'pods "{PROBE_POD}" not found' in text:
        return "answered", text
    return "failed", text


def admission_count(run: Run, pods: list[str]) -> int | None:
    """longhorn_guard_admission_requests_total summed over PODS, read through the API server."""
    total = 0
    for pod in pods:
        out = run.kubectl("get", "--raw", f"/api/v1/namespaces/{run.ns}/pods/https:{pod}:8443/proxy/metrics")
        if out.returncode != 0:
            return None
        total += sum(int(float(l.rsplit(" ", 1)[1])) for l in out.stdout.splitlines()
                     if l.startswith("longhorn_guard_admission_requests_total"))
    return total


def guard_pods(run: Run) -> list[dict]:
    pods = run.get_json("pods", "-n", run.ns, "-l", "app.kubernetes.io/name=longhorn-guard") or {"items": []}
    return pods["items"]


def pods_ready(pods: list[dict]) -> bool:
    return bool(pods) and all(
        any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))
        for p in pods)


def wait_until(seconds: float, probe) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if probe():
            return True
        time.sleep(1)
    return probe()


def policy_volume(deploy: dict) -> str:
    vols = deploy["spec"]["template"]["spec"]["volumes"]
    return next(v["configMap"]["name"] for v in vols if v["name"] == "policy")


class Reviews(threading.Thread):
    """Dry-run evictions one after another until stopped: answered and failed counts."""

    def __init__(self, run: Run):
        super().__init__(daemon=True)
        self.run_, self.stop, self.answered, self.failures = run, threading.Event(), 0, []

    def run(self) -> None:
        while not self.stop.is_set():
            result, text = evict(self.run_)
            if result == "answered":
                self.answered += 1
            else:
                self.failures.append(text)
            time.sleep(0.2)


def chart_floor() -> tuple[int, int]:
    """The (major, minor) of Chart.yaml's kubeVersion, which must read ">=MAJOR.MINOR.0-0"."""
    meta = helm.values_from_yaml((CHART / "Chart.yaml").read_text())
    m = re.fullmatch(r">=(\d+)\.(\d+)\.0-0", str(meta.get("kubeVersion", "")))
    if not m:
        die(f"Chart.yaml kubeVersion {meta.get('kubeVersion')!r} is not of the form >=MAJOR.MINOR.0-0")
    return int(m[1]), int(m[2])


def server_version(run: Run) -> tuple[int, int, str]:
    """The API server's (major, minor, gitVersion) from /version; a minor like "33+" is 33."""
    v = json.loads(run.kubectl("get", "--raw", "/version").stdout)
    return int(re.match(r"\d+", v["major"])[0]), int(re.match(r"\d+", v["minor"])[0]), v["gitVersion"]


def serves_v1(run: Run, kind: str) -> bool:
    """The API server serves KIND in admissionregistration.k8s.io/v1 (not only in a beta)."""
    out = run.kubectl("get", "--raw", "/apis/admissionregistration.k8s.io/v1")
    return out.returncode == 0 and any(r["kind"] == kind for r in json.loads(out.stdout)["resources"])


def below_floor(run: Run, cfg, chart, values, version: str, floor: tuple[int, int]) -> None:
    """Helm refuses the install before it creates anything: no namespace, no webhook
    configuration, no release record."""
    log(f"install on {version}, below the chart's floor {floor[0]}.{floor[1]}: Helm must refuse it")
    try:
        cfg.install(chart, run.release, values, namespace=run.ns, create_namespace=True)
        refused = ""
    except helm.HelmError as e:
        refused = str(e)
    print(f"    {refused or 'installed'}")
    run.check("the install is refused, naming the chart's kubeVersion and the cluster's version",
              f"chart requires kubeVersion: >={floor[0]}.{floor[1]}.0-0" in refused and version in refused, refused)
    run.check(f"namespace {run.ns} was not created", run.kubectl("get", "namespace", run.ns).returncode != 0)
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        run.check(f"no {kind} {fullname(run.release)}", run.kubectl("get", kind, fullname(run.release)).returncode != 0)
    records = run.kubectl("get", "secrets", "-A", "-l", f"owner=helm,name={run.release}", "-o", "name").stdout.split()
    run.check("no Helm release record", not records, " ".join(records))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--image", required=True, help="name:tag (or name@sha256:...) the nodes can run")
    ap.add_argument("--release", default="longhorn-guard-helm")
    ap.add_argument("--namespace", default="longhorn-guard-helm")
    ap.add_argument("--pull-policy", default="IfNotPresent")
    a = ap.parse_args()
    run = Run(a.kubeconfig, a.release, a.namespace)
    helm.disable_logging()

    if run.kubectl("get", "--raw", "/version").returncode != 0:
        die(f"no API server reachable through {a.kubeconfig}")
    if run.kubectl("get", "namespace", a.namespace).returncode == 0:
        die(f"namespace {a.namespace} exists: refusing to install over it")
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        if run.kubectl("get", kind, fullname(a.release)).returncode == 0:
            die(f"{kind} {fullname(a.release)} exists: refusing to run")
    repo, sep, ref = a.image.rpartition("@")
    if sep:
        image = {"repository": repo, "digest": ref}
    else:
        repo, sep, tag = a.image.rpartition(":")
        image = {"repository": repo, "tag": tag} if sep and "/" not in tag else {"repository": a.image, "tag": "latest"}
    image["pullPolicy"] = a.pull_policy
    values = {"image": image}
    kubelets = ready_nodes(run) > 0
    print(f"    image {a.image}; {'Ready nodes: pods and reviews checked' if kubelets else 'no Ready node: objects only, pods and reviews skipped'}")

    created_ns = created_crds = False
    if run.kubectl("get", "crd", "volumes.longhorn.io").returncode != 0:
        if not CRDS.is_file():
            die(f"Longhorn CRDs missing in the cluster and not found at {CRDS} (set E2E_CRDS)")
        run.kubectl("apply", "-f", str(CRDS))
        created_crds = True
    if run.kubectl("get", "namespace", LH_NS).returncode != 0:
        run.kubectl("create", "namespace", LH_NS)
        created_ns = True

    cfg = helm.Config(kubeconfig_path=a.kubeconfig, namespace=a.namespace)
    chart = helm.Chart.load(CHART)
    wait = {"wait": "watcher", "timeout": 300} if kubelets else {}
    major, minor, version = server_version(run)
    floor = chart_floor()
    print(f"    API server {version}; the chart's floor {floor[0]}.{floor[1]}")
    try:
        if (major, minor) < floor:
            below_floor(run, cfg, chart, values, version, floor)
        else:
            install(run, cfg, chart, values, wait, kubelets)
            upgrade(run, cfg, chart, values, wait, kubelets)
            uninstall(run, cfg, kubelets)
    finally:
        if created_ns:
            run.kubectl("delete", "namespace", LH_NS, "--wait=false")
        if created_crds:
            run.kubectl("delete", "-f", str(CRDS), "--wait=false")
    print(f"\n{run.passed} passed, {run.failed} failed")
    sys.exit(1 if run.failed else 0)


def reviews_possible(run: Run, kubelets: bool) -> bool:
    if not kubelets:
        print("    skipped (no Ready node): pods, /metrics and dry-run evictions")
        return False
    svc = run.get_json("service", "-n", run.ns, fullname(run.release)) or {}
    ip = svc.get("spec", {}).get("clusterIP", "")
    return run.check(f"the Service's ClusterIP {ip} is routed to a local device (else no review is sent)",
                     bool(ip) and routed_locally(ip), f"`ip route get {ip}` leaves by the default route")


def install(run: Run, cfg, chart, values, wait, kubelets) -> None:
    log(f"install {run.release} into {run.ns} (create_namespace, {wait or 'no wait'})")
    rel = cfg.install(chart, run.release, values, namespace=run.ns, create_namespace=True, **wait)
    print("    " + rel["notes"].splitlines()[0])
    run.check("release deployed, revision 1", (rel["status"], rel["revision"]) == ("deployed", 1), str(rel["status"]))
    missing = []
    for obj in objects(rel["manifest"]):
        ns = obj["metadata"].get("namespace")
        args = [obj["kind"], obj["metadata"]["name"]] + (["-n", ns] if ns else [])
        if run.kubectl("get", *args).returncode != 0:
            missing.append("/".join(args))
    run.check(f"every object of the manifest exists ({len(objects(rel['manifest']))})", not missing, ", ".join(missing))
    gate_form(run, objects(rel["manifest"]))
    if not reviews_possible(run, kubelets):
        return
    pods = guard_pods(run)
    run.check(f"pods Ready ({len(pods)})", pods_ready(pods) and len(pods) == 2, str([p["metadata"]["name"] for p in pods]))
    names = [p["metadata"]["name"] for p in pods]
    before = admission_count(run, names)
    run.check("/metrics of every pod through the API server", before is not None)
    result, text = evict(run)
    print(f"    dry-run eviction of {LH_NS}/{PROBE_POD}: {text[:200]}")
    after = admission_count(run, names)
    run.check("a dry-run eviction is answered by the webhook (its admission counter moved)",
              result == "answered" and before is not None and after is not None and after > before,
              f"{result}: {text[:300]}; counter {before} -> {after}")


def gate_form(run: Run, objs: list[dict]) -> None:
    """initGate.via auto: the form the API server serves, and only that one."""
    kinds = {o["kind"] for o in objs}
    entries = [w["name"] for o in objs if o["kind"] == "MutatingWebhookConfiguration" for w in o["webhooks"]]
    if serves_v1(run, "MutatingAdmissionPolicy"):
        run.check("v1 MutatingAdmissionPolicy served: the gate is the policy and its binding, no webhook entry",
                  {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} <= kinds and not entries,
                  f"kinds {sorted(kinds)}, mutating entries {entries}")
    else:
        run.check("no v1 MutatingAdmissionPolicy served: the gate is the webhook entry, no policy",
                  entries == ["init-gate.longhorn-guard.io"] and not kinds & {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
                  f"kinds {sorted(kinds)}, mutating entries {entries}")


def upgrade(run: Run, cfg, chart, values, wait, kubelets) -> None:
    deploy = run.get_json("deployment", "-n", run.ns, fullname(run.release))
    old_cm = policy_volume(deploy)
    old_ca = (run.get_json("secret", "-n", run.ns, f"{fullname(run.release)}-tls") or {}).get("data", {}).get("ca.crt")
    old_pods = {p["metadata"]["name"] for p in guard_pods(run)}
    changed = {**values, "policy": {"drain": {"maxListedVolumes": 7}, "replicas": {"minimum": 2}}}
    log("upgrade with a changed policy (drain.maxListedVolumes 7, replicas.minimum 2)")
    reviews = Reviews(run) if kubelets and routed_service(run) else None
    if reviews:
        reviews.start()
    t0 = time.monotonic()
    rel = cfg.upgrade(chart, run.release, changed, namespace=run.ns, **wait)
    print(f"    upgrade returned after {time.monotonic() - t0:.1f}s")
    run.check("release deployed, revision 2", (rel["status"], rel["revision"]) == ("deployed", 2), str(rel["status"]))
    deploy = run.get_json("deployment", "-n", run.ns, fullname(run.release))
    new_cm = policy_volume(deploy)
    run.check(f"a new policy ConfigMap {new_cm} (was {old_cm})", new_cm != old_cm)
    cm = run.get_json("configmap", "-n", run.ns, new_cm) or {"data": {}}
    run.check("it holds the changed policy", "maxListedVolumes: 7" in cm["data"].get("policy.yaml", ""))
    run.check("the old ConfigMap is gone", run.kubectl("get", "configmap", "-n", run.ns, old_cm).returncode != 0)
    new_ca = (run.get_json("secret", "-n", run.ns, f"{fullname(run.release)}-tls") or {}).get("data", {}).get("ca.crt")
    run.check("the generated CA is kept across the upgrade (lookup)", bool(old_ca) and new_ca == old_ca)
    bundles = {w["clientConfig"].get("caBundle") for w in
               run.get_json("validatingwebhookconfiguration", fullname(run.release))["webhooks"]}
    run.check("the caBundles are still that CA", bundles == {old_ca})
    if not reviews:
        if kubelets:
            run.check("reviews during the upgrade", False, "not sent: the Service's ClusterIP is not routed locally")
        return
    rolled = wait_until(120, lambda: (lambda pods: pods_ready(pods) and len(pods) == 2
                                      and not ({p["metadata"]["name"] for p in pods} & old_pods))(guard_pods(run)))
    time.sleep(5)
    reviews.stop.set()
    reviews.join(30)
    pods = guard_pods(run)
    run.check(f"the pods rolled: all new and Ready ({', '.join(p['metadata']['name'] for p in pods)})", rolled)
    run.check("every new pod mounts the new policy",
              all(policy_volume({"spec": {"template": p}}) == new_cm for p in pods))
    print(f"    dry-run evictions during the upgrade: {reviews.answered} answered, {len(reviews.failures)} failed")
    for text in reviews.failures[:5]:
        print(f"      failed: {text[:300]}")
    run.check("no review failed during the upgrade", reviews.answered > 0 and not reviews.failures,
              f"{len(reviews.failures)} of {reviews.answered + len(reviews.failures)}")


def routed_service(run: Run) -> bool:
    ip = (run.get_json("service", "-n", run.ns, fullname(run.release)) or {}).get("spec", {}).get("clusterIP", "")
    return bool(ip) and routed_locally(ip)


def uninstall(run: Run, cfg, kubelets) -> None:
    log(f"uninstall {run.release}")
    rel = cfg.uninstall(run.release, **({"wait": "watcher", "timeout": 120} if kubelets else {}))
    run.check("release uninstalled", rel["release"]["status"] == "uninstalled", str(rel["release"]["status"]))
    selector = f"app.kubernetes.io/instance={run.release}"
    kinds = ("deployments,replicasets,pods,services,endpointslices,configmaps,secrets,serviceaccounts,"
             "poddisruptionbudgets,roles,rolebindings,clusterroles,clusterrolebindings,"
             "validatingwebhookconfigurations,mutatingwebhookconfigurations")
    left = run.kubectl("get", kinds, "-A", "-l", selector, "-o", "name").stdout.split()
    run.check(f"no object labelled {selector} is left", not left, " ".join(left))
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        confs = (run.get_json(kind) or {"items": []})["items"]
        ours = [c["metadata"]["name"] for c in confs
                if any(w["clientConfig"].get("service", {}).get("namespace") == run.ns for w in c.get("webhooks", []))]
        run.check(f"no {kind[:-1]} calls a Service in {run.ns}", not ours, ", ".join(ours))
    records = run.kubectl("get", "secrets", "-n", run.ns, "-l", f"owner=helm,name={run.release}", "-o", "name").stdout.split()
    run.check("no Helm release record is left", not records, " ".join(records))
    run.check("no longhorn-guard pod is left",
              wait_until(90, lambda: not guard_pods(run)), str([p["metadata"]["name"] for p in guard_pods(run)]))
    kinds = "all,configmaps,secrets,serviceaccounts,roles,rolebindings,poddisruptionbudgets"
    leftover = run.kubectl("get", kinds, "-n", run.ns, "-o", "name").stdout.split()
    # What the controllers put in every namespace, as in kube-node-lease, which nothing else
    # writes to: kube-root-ca.crt and the default ServiceAccount, and with a controller-manager
    # built from OpenShift's Kubernetes tree also openshift-service-ca.crt.
    every = set(run.kubectl("get", kinds, "-n", "kube-node-lease", "-o", "name").stdout.split())
    leftover = [o for o in leftover if o not in every and not o.endswith(("/kube-root-ca.crt", "serviceaccount/default"))]
    run.check(f"namespace {run.ns} holds nothing but what Kubernetes puts in every namespace", not leftover,
              " ".join(leftover))
    if kubelets and routed_service_gone(run):
        result, text = evict(run)
        run.check("a dry-run eviction reaches no webhook any more", "failed calling webhook" not in text, text[:300])
    delete_namespace(run)
    run.check(f"namespace {run.ns} (created by the install) deleted",
              wait_until(60, lambda: run.kubectl("get", "namespace", run.ns).returncode != 0))


def routed_service_gone(run: Run) -> bool:
    return run.kubectl("get", "service", "-n", run.ns, fullname(run.release)).returncode != 0


def delete_namespace(run: Run) -> None:
    """Deletes the namespace; a bare API server has no namespace controller to finalize it, so
    after 20 s without one it is finalized through the API, as that controller would."""
    run.kubectl("delete", "namespace", run.ns, "--wait=false")
    if wait_until(20, lambda: run.kubectl("get", "namespace", run.ns).returncode != 0):
        return
    ns = run.get_json("namespace", run.ns)
    if ns and not ns.get("status", {}).get("conditions"):
        print(f"    no namespace controller: finalizing namespace {run.ns}")
        ns["spec"]["finalizers"] = []
        run.kubectl("replace", "--raw", f"/api/v1/namespaces/{run.ns}/finalize", "-f", "-", stdin=json.dumps(ns))


if __name__ == "__main__":
    main()
