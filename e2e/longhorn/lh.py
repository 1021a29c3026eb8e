#!/usr/bin/env python3
"""Longhorn's own install (deploy/longhorn.yaml of the user's longhorn/longhorn tree), cut to
what the real-Longhorn suite runs, for e2e/longhorn/checks.sh.

  lh.py manifest LONGHORN_SRC MANAGER_IMAGE ENGINE_IMAGE IM_IMAGE WEBHOOK_IP > longhorn.yaml

Kept as upstream ships them: the namespace, PriorityClass, CRDs, RBAC, the manager's
ServiceAccount, the Services and the manager DaemonSet. Left out: the UI, the CSI driver
deployer, the StorageClass ConfigMap, NetworkPolicies (no controller enforces them here) and the
support-bundle account. Changed, each for the reason beside it in `manager()`.
Exit 0 written, 2 unreadable input.
"""
import sys

try:
    import yaml
except ImportError:
    sys.exit("lh.py: python3 yaml missing (Debian python3-yaml)")

KEEP_KINDS = {"Namespace", "PriorityClass", "CustomResourceDefinition", "ClusterRole",
              "ClusterRoleBinding", "Role", "RoleBinding", "Service", "DaemonSet",
              "ConfigMap", "ServiceAccount"}
DROP_NAMES = {"longhorn-ui-service-account", "longhorn-support-bundle", "longhorn-frontend",
              "longhorn-storageclass"}

# Settings Longhorn reads once, at its first start: disks per node (every node shares this
# host's /var/lib/longhorn), nothing that calls out of the machine.
DEFAULT_SETTINGS = {
    "priority-class": "longhorn-critical",
    "disable-revision-counter": '{"v1":"true"}',
    "create-default-disk-labeled-nodes": "true",
    "upgrade-checker": "false",
    "allow-collecting-longhorn-usage-metrics": "false",
}


def manager(ds, images, webhook_ip):
    spec = ds["spec"]["template"]["spec"]
    # The share-manager pre-pull sidecar pulls an image no test uses.
    spec["containers"] = [c for c in spec["containers"] if c["name"] == "longhorn-manager"]
    c = spec["containers"][0]
    cmd = c["command"]
    flags = {"--engine-image": images["engine"], "--instance-manager-image": images["im"],
             "--manager-image": images["manager"]}
    for i, arg in enumerate(cmd[:-1]):
        if arg in flags:
            cmd[i + 1] = flags[arg]
    # --upgrade-version-check compares with the previous install's version only; kept.
    c["image"] = images["manager"]
    # Images are imported into each node's containerd; there is no registry to pull from.
    c["imagePullPolicy"] = "Never"
    # No cluster DNS: the webhook's Service name resolves through the pod's /etc/hosts.
    spec["hostAliases"] = [{"ip": webhook_ip, "hostnames": [
        "longhorn-admission-webhook.longhorn-system.svc",
        "longhorn-admission-webhook.longhorn-system.svc.cluster.local"]}]


def main(argv):
    if len(argv) != 7 or argv[1] != "manifest":
        sys.exit("usage: lh.py manifest LONGHORN_SRC MANAGER_IMAGE ENGINE_IMAGE IM_IMAGE WEBHOOK_IP")
    src, images, webhook_ip = argv[2], {"manager": argv[3], "engine": argv[4], "im": argv[5]}, argv[6]
    try:
        with open(f"{src}/deploy/longhorn.yaml", encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
    except (OSError, yaml.YAMLError) as e:
        print(f"lh.py: cannot read {src}/deploy/longhorn.yaml: {e}", file=sys.stderr)
        return 2
    out = []
    for d in docs:
        name = d["metadata"]["name"]
        if d["kind"] not in KEEP_KINDS or name in DROP_NAMES:
            continue
        if d["kind"] == "ConfigMap" and name == "longhorn-default-setting":
            d["data"]["default-setting.yaml"] = yaml.safe_dump(DEFAULT_SETTINGS, default_flow_style=False)
        if d["kind"] == "Service" and name == "longhorn-admission-webhook":
            d["spec"]["clusterIP"] = webhook_ip
        if d["kind"] == "DaemonSet" and name == "longhorn-manager":
            manager(d, images, webhook_ip)
        out.append(d)
    yaml.safe_dump_all(out, sys.stdout, default_flow_style=False, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
