#!/usr/bin/env python3
"""The Longhorn stand-in of the real-kubelet suite (e2e/cluster.sh), written through kubectl.

Objects have the shapes of e2e/state (what the bare-API-server suite writes): Settings,
Longhorn Nodes, one InstanceManager per node, and for each a real instance-manager Pod
(labelled and owned as longhorn-manager makes them, pinned with spec.nodeName, the sleeping
image), plus volumes with their replicas and engine, statuses written through the status
subresource as Longhorn's controllers would. Everything is labelled longhorn-guard-e2e=true.

  longhorn.py base NODES IMAGE
  longhorn.py im-pod NODE IMAGE [--name N] [--networks JSON] [--delay D] [--status-key K]
  longhorn.py volume NAME --replicas node-1=healthy,node-2=rebuilding [--attached NODE] [--workload NS/POD]
  longhorn.py heal NAME NODE        # the rebuild on NODE finished (healthyAt, RW, no rebuild)
  longhorn.py detach NAME           # the engine stopped and the volume detached
  longhorn.py delete-volume NAME

The Longhorn release it stands in for is E2E_STANDIN_LONGHORN_VERSION (vMAJOR.MINOR.PATCH,
default v1.12.1): the tag of the engine and instance-manager images its objects name. The CRDs
it writes into are e2e/cluster.sh's E2E_CRDS (default the fixtures' v1.12.1 ones); to stand in
for another release, point both at it. The objects are written in one shape for v1.10.x to
v1.12.x: a field a release's schema lacks (an InstanceManager's status.conditions before
v1.11) is dropped by the API server, as it would be from Longhorn's own write. A version not
of that form stops the stand-in with exit 1 before it writes anything.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time

NS = "longhorn-system"
LABEL = {"longhorn-guard-e2e": "true"}
VERSION = os.environ.get("E2E_STANDIN_LONGHORN_VERSION") or "v1.12.1"
if not re.fullmatch(r"v\d+\.\d+\.\d+", VERSION):
    sys.exit(f"longhorn.py: E2E_STANDIN_LONGHORN_VERSION={VERSION!r} is not vMAJOR.MINOR.PATCH")
ENGINE_IMAGE = f"longhornio/longhorn-engine:{VERSION}"
IM_IMAGE = f"longhornio/longhorn-instance-manager:{VERSION}"


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def kubectl(*args, stdin=None):
    cmd = [os.environ.get("KUBECTL", "kubectl"), "--request-timeout=20s", *args]
    out = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"longhorn.py: {' '.join(args[:4])}: {out.stderr.strip()}")
    return out.stdout


def create(obj):
    return json.loads(kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(obj)))


def patch(resource, name, body, status=False):
    extra = ["--subresource=status"] if status else []
    kubectl("-n", NS, "patch", resource, name, "--type=merge", "-p", json.dumps(body), *extra)


def meta(name, **labels):
    return {"name": name, "namespace": NS, "labels": {**LABEL, **labels}}


def im_name(node):
    return "instance-manager-" + hashlib.md5(node.encode()).hexdigest()


def disk_uuid(node):
    h = hashlib.sha256(node.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def cond(type_, status="True", message=""):
    return {"type": type_, "status": status, "reason": "", "message": message, "lastProbeTime": "", "lastTransitionTime": now()}


def base(args):
    for name, value in (("default-replica-count", '{"v1":"3","v2":"3"}'),
                        ("node-drain-policy", "block-if-contains-last-replica"), ("storage-network", "")):
        create({"apiVersion": "longhorn.io/v1beta2", "kind": "Setting", "metadata": meta(name), "value": value})
    for i in range(1, args.nodes + 1):
        node = f"node-{i}"
        disk = f"default-disk-{hashlib.md5(node.encode()).hexdigest()[:16]}"
        create({"apiVersion": "longhorn.io/v1beta2", "kind": "Node", "metadata": meta(node),
                "spec": {"allowScheduling": True, "evictionRequested": False, "name": node, "tags": [],
                         "disks": {disk: {"allowScheduling": True, "diskType": "filesystem", "evictionRequested": False,
                                          "path": "/var/lib/longhorn/", "storageReserved": 0, "tags": []}}}})
        patch("nodes.longhorn.io", node, {"status": {"conditions": [cond("Ready", message=f"Node {node} is ready"), cond("Schedulable"),
              cond("MountPropagation"), cond("KernelModulesLoaded"), cond("RequiredPackages")],
              "diskStatus": {disk: {"conditions": [cond("Ready"), cond("Schedulable")], "diskName": disk, "diskPath": "/var/lib/longhorn/",
                                    "diskType": "filesystem", "diskUUID": disk_uuid(node), "instanceManagerName": im_name(node),
                                    "storageAvailable": 92878667776, "storageMaximum": 107374182400, "storageScheduled": 0,
                                    "scheduledReplica": {}}}}}, status=True)
        create({"apiVersion": "longhorn.io/v1beta2", "kind": "InstanceManager",
                "metadata": meta(im_name(node), **{"longhorn.io/node": node, "longhorn.io/component": "instance-manager",
                                                  "longhorn.io/instance-manager-type": "aio", "longhorn.io/data-engine": "v1"}),
                "spec": {"dataEngine": "v1", "image": IM_IMAGE, "nodeID": node, "type": "aio"}})
        patch("instancemanagers.longhorn.io", im_name(node), {"status": {"currentState": "running", "ownerID": node,
              "conditions": [cond("NodeReady"), cond("PodReady")], "instanceEngines": {}, "instanceReplicas": {}}}, status=True)
        im_pod(argparse.Namespace(node=node, image=args.image, name=None, networks=None, delay=None, status_key=None))


def im_pod(args):
    im = im_name(args.node)
    uid = kubectl("-n", NS, "get", "instancemanagers.longhorn.io", im, "-o", "jsonpath={.metadata.uid}")
    annotations = {"longhorn.io/last-applied-tolerations": "[]"}
    if args.networks:
        annotations["k8s.v1.cni.cncf.io/networks"] = args.networks
    if args.delay:
        annotations["e2e.longhorn-guard.io/multus-delay"] = args.delay
    if args.status_key:
        annotations["e2e.longhorn-guard.io/multus-status-key"] = args.status_key
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {**meta(args.name or im, **{"longhorn.io/component": "instance-manager", "longhorn.io/data-engine": "v1",
                                                "longhorn.io/instance-manager-image": "imi-8f8e1a2b",
                                                "longhorn.io/instance-manager-type": "aio",
                                                "longhorn.io/managed-by": "longhorn-manager", "longhorn.io/node": args.node}),
                     "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "longhorn.io/v1beta2", "kind": "InstanceManager", "name": im, "uid": uid,
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"nodeName": args.node, "restartPolicy": "Never", "serviceAccountName": "longhorn-service-account",
                 "terminationGracePeriodSeconds": 30,
                 "tolerations": [{"effect": "NoExecute", "key": k, "operator": "Exists", "tolerationSeconds": 300}
                                 for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")],
                 "containers": [{"name": "instance-manager", "image": args.image, "imagePullPolicy": "IfNotPresent",
                                 "resources": {"requests": {"cpu": "50m", "memory": "16Mi"}},
                                 "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}]},
    }
    created = create(pod)
    print(created["metadata"]["name"])


def volume(args):
    replicas = [r.split("=", 1) for r in args.replicas.split(",")]
    attached = args.attached or ""
    engine = f"{args.name}-e-0"
    ws_ns, _, ws_pod = (args.workload or "").partition("/")
    create({"apiVersion": "longhorn.io/v1beta2", "kind": "Volume", "metadata": meta(args.name, longhornvolume=args.name),
            "spec": {"accessMode": "rwo", "dataEngine": "v1", "dataLocality": "disabled", "frontend": "blockdev",
                     "image": ENGINE_IMAGE, "migratable": False, "nodeID": attached, "numberOfReplicas": len(replicas),
                     "size": "5368709120", "staleReplicaTimeout": 30, "revisionCounterDisabled": True}})
    degraded = any(state != "healthy" for _, state in replicas)
    patch("volumes.longhorn.io", args.name, {"status": {
        "state": "attached" if attached else "detached", "robustness": ("degraded" if degraded else "healthy") if attached else "unknown",
        "currentNodeID": attached, "ownerID": attached or replicas[0][0], "currentImage": ENGINE_IMAGE,
        "kubernetesStatus": {"namespace": ws_ns, "pvcName": f"data-{args.name}", "pvName": args.name, "pvStatus": "Bound",
                             "workloadsStatus": [{"podName": ws_pod, "podStatus": "Running", "workloadName": ws_pod,
                                                  "workloadType": "Pod"}] if ws_pod else []}}}, status=True)
    modes, addresses, rebuild = {}, {}, {}
    for n, (node, state) in enumerate(replicas):
        rname = f"{args.name}-r-{n}"
        healthy = state == "healthy"
        create({"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
                "metadata": meta(rname, longhornnode=node, longhornvolume=args.name, longhorndiskuuid=disk_uuid(node)),
                "spec": {"active": True, "dataEngine": "v1", "desireState": "running" if attached else "stopped",
                         "diskID": disk_uuid(node), "diskPath": "/var/lib/longhorn/", "engineName": engine, "evictionRequested": False,
                         "failedAt": "", "hardNodeAffinity": "", "healthyAt": now() if healthy else "", "image": ENGINE_IMAGE,
                         "lastFailedAt": "" if healthy else now(), "lastHealthyAt": now() if healthy else "", "nodeID": node,
                         "volumeName": args.name, "volumeSize": "5368709120", "dataDirectoryName": f"{rname}-data"}})
        patch("replicas.longhorn.io", rname, {"status": {"currentState": "running" if attached else "stopped",
              "instanceManagerName": im_name(node) if attached else "", "ownerID": node, "started": bool(attached)}}, status=True)
        if attached:
            patch("instancemanagers.longhorn.io", im_name(node), {"status": {"instanceReplicas": {rname: {
                  "spec": {"name": rname, "dataEngine": "v1"}, "status": {"state": "running", "type": "replica"}}}}}, status=True)
        addresses[rname] = f"10.233.{node.split('-')[1]}.100:{10000 + n}"
        modes[rname] = "RW" if healthy else "WO"
        if not healthy:
            rebuild[f"tcp://{addresses[rname]}"] = {"isRebuilding": True, "progress": 0, "state": "in_progress", "error": "",
                                                    "fromReplicaAddress": "", "appliedRebuildingMBps": 0}
    if attached:
        create({"apiVersion": "longhorn.io/v1beta2", "kind": "Engine", "metadata": meta(engine, longhornnode=attached, longhornvolume=args.name),
                "spec": {"active": True, "dataEngine": "v1", "desireState": "running", "frontend": "blockdev", "image": ENGINE_IMAGE,
                         "nodeID": attached, "volumeName": args.name, "volumeSize": "5368709120",
                         "replicaAddressMap": addresses}})
        patch("engines.longhorn.io", engine, {"status": {"currentState": "running", "instanceManagerName": im_name(attached),
              "ownerID": attached, "started": True, "replicaModeMap": modes, "currentReplicaAddressMap": addresses,
              "rebuildStatus": rebuild, "endpoint": f"/dev/longhorn/{args.name}"}}, status=True)
        patch("instancemanagers.longhorn.io", im_name(attached), {"status": {"instanceEngines": {engine: {
              "spec": {"name": engine, "dataEngine": "v1"}, "status": {"state": "running", "type": "engine"}}}}}, status=True)


def heal(args):
    replicas = json.loads(kubectl("-n", NS, "get", "replicas.longhorn.io", "-l", f"longhornvolume={args.name}", "-o", "json"))["items"]
    for r in replicas:
        if r["spec"]["nodeID"] == args.node:
            patch("replicas.longhorn.io", r["metadata"]["name"], {"spec": {"healthyAt": now(), "lastHealthyAt": now(), "failedAt": ""}})
            engine = r["spec"]["engineName"]
            if kubectl("-n", NS, "get", "engines.longhorn.io", "--ignore-not-found", "-o", "name", engine).strip():
                patch("engines.longhorn.io", engine, {"status": {"replicaModeMap": {r["metadata"]["name"]: "RW"}, "rebuildStatus": None}}, status=True)
    patch("volumes.longhorn.io", args.name, {"status": {"robustness": "healthy"}}, status=True)


def detach(args):
    engine = f"{args.name}-e-0"
    node = json.loads(kubectl("-n", NS, "get", "engines.longhorn.io", engine, "-o", "json"))["spec"]["nodeID"]
    if node:  # the instance manager no longer runs the engine process
        patch("instancemanagers.longhorn.io", im_name(node), {"status": {"instanceEngines": {engine: None}}}, status=True)
    patch("engines.longhorn.io", engine, {"spec": {"desireState": "stopped", "nodeID": ""}})
    patch("engines.longhorn.io", engine, {"status": {"currentState": "stopped", "instanceManagerName": "", "started": False}}, status=True)
    # As real Longhorn (v1.10.2 to v1.12.1) leaves a stopped engine: these two maps are null, not absent (a
    # merge patch cannot write null, a JSON patch can).
    kubectl("-n", NS, "patch", "engines.longhorn.io", engine, "--type=json", "--subresource=status", "-p", json.dumps(
        [{"op": "add", "path": f"/status/{key}", "value": None} for key in ("replicaModeMap", "rebuildStatus")]))
    patch("volumes.longhorn.io", args.name, {"spec": {"nodeID": ""}})
    patch("volumes.longhorn.io", args.name, {"status": {"state": "detached", "currentNodeID": "", "robustness": "unknown",
          "kubernetesStatus": {"workloadsStatus": []}}}, status=True)


def delete_volume(args):
    for kind in ("engines", "replicas"):
        kubectl("-n", NS, "delete", f"{kind}.longhorn.io", "-l", f"longhornvolume={args.name}", "--wait=false")
    kubectl("-n", NS, "delete", "volumes.longhorn.io", args.name, "--wait=false")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("base")
    b.add_argument("nodes", type=int)
    b.add_argument("image")
    i = sub.add_parser("im-pod")
    i.add_argument("node")
    i.add_argument("image")
    for flag in ("--name", "--networks", "--delay", "--status-key"):
        i.add_argument(flag)
    v = sub.add_parser("volume")
    v.add_argument("name")
    v.add_argument("--replicas", required=True)
    v.add_argument("--attached")
    v.add_argument("--workload")
    h = sub.add_parser("heal")
    h.add_argument("name")
    h.add_argument("node")
    for cmd in ("detach", "delete-volume"):
        sub.add_parser(cmd).add_argument("name")
    args = p.parse_args()
    {"base": base, "im-pod": im_pod, "volume": volume, "heal": heal, "detach": detach,
     "delete-volume": delete_volume}[args.cmd](args)


if __name__ == "__main__":
    main()
