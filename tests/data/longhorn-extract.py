#!/usr/bin/env python3
"""What longhorn-guard relies on of one Longhorn release, read from its public sources, for the
version tests (tests/it/longhorn_versions.rs). Writes into OUT_DIR:

  crds.json     the v1beta2 schema of each kind the guard reads (types, properties, enums and
                nullability only; descriptions and other validations dropped) and its printer
                columns, from LONGHORN/deploy/longhorn.yaml
  longhorn.json the settings (name -> default), node-drain-policy's choices, the Helm chart's
                defaultSettings keys, the instance-manager pod labels, the storage-network
                annotation and the Multus status annotations Longhorn reads, the instance-manager
                PodDisruptionBudget's name and selector, and Longhorn's own webhook paths, from
                MANAGER (longhorn-manager) and LONGHORN (longhorn/longhorn) at the same tag

  longhorn-extract.py LONGHORN_TREE MANAGER_TREE OUT_DIR

Each value is read from the Go source text as written (constants resolved one step); a
setting's default set at run time is kept as its Go expression (`defaultGo`); anything else
that cannot be read stops the script (exit 2) naming it, so a release that moved it is
noticed, never written as empty.
"""
import json
import os
import re
import sys

try:
    import yaml
except ImportError:
    sys.exit("longhorn-extract.py: python3 yaml missing (Debian python3-yaml)")

KINDS = ["Volume", "Replica", "Engine", "Node", "InstanceManager", "Setting",
         "BackupTarget", "RecurringJob", "Snapshot"]
KEEP = {"type", "properties", "additionalProperties", "items", "enum", "nullable",
        "x-kubernetes-preserve-unknown-fields"}


class Missing(Exception):
    pass


def trim(schema):
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k not in KEEP:
                continue
            if k == "properties":
                out[k] = {name: trim(s) for name, s in v.items()}
            else:
                out[k] = trim(v)
        return out
    if isinstance(schema, list):
        return [trim(x) for x in schema]
    return schema


def crds(longhorn):
    out = {}
    with open(os.path.join(longhorn, "deploy/longhorn.yaml"), encoding="utf-8") as f:
        for d in yaml.safe_load_all(f):
            if not d or d.get("kind") != "CustomResourceDefinition":
                continue
            kind = d["spec"]["names"]["kind"]
            if kind not in KINDS:
                continue
            for ver in d["spec"]["versions"]:
                if ver["name"] == "v1beta2":
                    out[kind] = {
                        "plural": d["spec"]["names"]["plural"],
                        "served": bool(ver.get("served")),
                        "scope": d["spec"]["scope"],
                        "printerColumns": [[c["name"], c["jsonPath"]]
                                           for c in ver.get("additionalPrinterColumns", [])],
                        "schema": trim(ver["schema"]["openAPIV3Schema"]),
                    }
    missing = [k for k in KINDS if k not in out]
    if missing:
        raise Missing(f"deploy/longhorn.yaml has no v1beta2 CRD of {missing}")
    return out


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def go_sources(root, sub):
    text = []
    for dirpath, _, files in os.walk(os.path.join(root, sub)):
        for name in sorted(files):
            if name.endswith(".go") and not name.endswith("_test.go"):
                text.append(read(os.path.join(dirpath, name)))
    return "\n".join(text)


def constants(src):
    """Go string constants: `Name = "v"` and `Name = Type("v")`."""
    return dict(re.findall(r'^\s*(\w+)\s*=\s*(?:\w+\()?"([^"]*)"\)?\s*(?://.*)?$', src, re.M))


def resolve(expr, consts):
    expr = expr.strip().rstrip(",")
    m = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', expr)
    if m:
        return json.loads(expr)
    m = re.fullmatch(r'(?:string\()?(?:\w+\.)?(\w+)\)?', expr)
    if m and m.group(1) in consts:
        return consts[m.group(1)]
    m = re.fullmatch(r'strconv\.Itoa\((\w+)\)', expr)
    if m:
        number = re.search(r'^\s*%s\s*=\s*(\d+)\s*$' % m.group(1), consts.get("", ""), re.M)
        if number:
            return number.group(1)
    m = re.fullmatch(r'fmt\.Sprintf\(("(?:[^"\\]|\\.)*"),\s*(.*)\)', expr)
    if m:
        args = [resolve(a, consts) for a in m.group(2).split(",")]
        fmt_ = json.loads(m.group(1)).replace("%q", '"%s"').replace("%v", "%s").replace("%d", "%s")
        try:
            return fmt_ % tuple(args)
        except TypeError as e:
            raise Missing(f"cannot read the Go expression {expr!r}: {e}") from e
    raise Missing(f"cannot read the Go expression {expr!r}")


def settings(manager, consts):
    src = read(os.path.join(manager, "types/setting.go"))
    names = dict(re.findall(r'^\s*(SettingName\w+)\s*=\s*SettingName\("([^"]+)"\)', src, re.M))
    # settingDefinitions: SettingNameX: SettingDefinitionY
    table = re.search(r"settingDefinitions = map\[SettingName\]SettingDefinition\{(.*?)\n\t\}", src, re.S)
    if not table:
        raise Missing("types/setting.go has no settingDefinitions map")
    pairs = re.findall(r"(SettingName\w+):\s*(SettingDefinition\w+)", table.group(1))
    out = {}
    for name_const, def_const in pairs:
        body = re.search(r"\b%s = SettingDefinition\{(.*?)\n\t\}" % def_const, src, re.S)
        if not body or name_const not in names:
            raise Missing(f"types/setting.go: no {def_const} or {name_const}")
        b = body.group(1)
        default = re.search(r"^\s*Default:\s*(.*?),?\s*$", b, re.M)
        kind = re.search(r"^\s*Type:\s*(\w+)", b, re.M)
        entry = {"type": kind.group(1) if kind else None}
        try:
            entry["default"] = resolve(default.group(1), consts) if default else ""
        except Missing:
            # Set at run time (a version, an image): kept as the Go expression.
            entry["defaultGo"] = default.group(1).strip()
        if re.search(r"^\s*DataEngineSpecific:\s*true", b, re.M):
            entry["dataEngineSpecific"] = True
        out[names[name_const]] = entry
    policies = sorted(v for k, v in consts.items() if k.startswith("NodeDrainPolicy"))
    if not policies:
        raise Missing("no NodeDrainPolicy constants")
    return out, policies


def chart_settings(longhorn):
    with open(os.path.join(longhorn, "chart/values.yaml"), encoding="utf-8") as f:
        values = yaml.safe_load(f)
    return sorted(values.get("defaultSettings") or {}), sorted(values.get("persistence") or {})


def labels(manager, consts):
    src = read(os.path.join(manager, "types/types.go"))
    body = re.search(r"func GetInstanceManagerLabels\(.*?\n\}", src, re.S)
    if not body:
        raise Missing("types/types.go has no GetInstanceManagerLabels")
    prefix = consts["LonghornLabelKeyPrefix"]
    keys = {}
    for key_expr, value_expr in re.findall(r"labels\[(.*?)\]\s*=\s*(.*)", body.group(0)):
        if key_expr == "GetLonghornLabelComponentKey()":
            key = f"{prefix}/component"
        else:
            m = re.fullmatch(r"GetLonghornLabelKey\((\w+)\)", key_expr)
            if not m:
                raise Missing(f"GetInstanceManagerLabels: label key {key_expr!r}")
            key = f"{prefix}/{consts[m.group(1)]}"
        value_expr = value_expr.strip()
        keys[key] = consts.get(value_expr, f"<{value_expr}>")
    return keys


def network(manager, consts):
    types_src = go_sources(manager, "types")
    fmt_ = re.search(r'fmt\.Sprintf\((`\{"namespace"[^`]*`|"\[\{\\"namespace(?:[^"\\]|\\.)*")', types_src)
    if not fmt_:
        raise Missing("types: no CNI annotation format")
    text = fmt_.group(1)
    sample = text[1:-1] if text.startswith("`") else json.loads(text)
    for value in ["kube-system", "storage", consts["StorageNetworkInterface"]]:
        sample = sample.replace("%s", value, 1)
    if not sample.startswith("["):
        sample = f"[{sample}]"
    ds = read(os.path.join(manager, "datastore/kubernetes.go"))
    body = re.search(r"func \(s \*DataStore\) Get(?:Storage)?IPFromPod\w*\(.*?\n\}", ds, re.S)
    if not body:
        raise Missing("datastore/kubernetes.go has no GetStorageIPFromPod or GetIPFromPodByCNISetting")
    order = [consts[c] for c in re.findall(r"pod\.Annotations\[string\(types\.(CNIAnnotation\w+)\)\]",
                                            body.group(0))]
    return {"annotation": consts["CNIAnnotationNetworks"], "sample": sample,
            "interface": consts["StorageNetworkInterface"], "statusRead": order}


def pdb(manager):
    """The instance-manager budget's name and selector."""
    src = read(os.path.join(manager, "types/types.go"))
    m = re.search(r"func GetPDBNameFromIMName\(imName string\) string \{\s*return (.*?)\s*\}", src, re.S)
    if not m:
        raise Missing("types/types.go has no GetPDBNameFromIMName")
    ctl = read(os.path.join(manager, "controller/instance_manager_controller.go"))
    body = re.search(r"func \(imc \*InstanceManagerController\) generateInstanceManagerPDBManifest\(.*?\n\}", ctl, re.S)
    if not body:
        raise Missing("controller/instance_manager_controller.go has no generateInstanceManagerPDBManifest")
    selector = re.search(r"MatchLabels:\s*types\.(\w+)\(", body.group(0))
    if not selector:
        raise Missing("generateInstanceManagerPDBManifest: no MatchLabels")
    return {"name": "the instance manager's name" if m.group(1) == "imName" else m.group(1),
            "selector": "instanceManagerPodLabels" if selector.group(1) == "GetInstanceManagerLabels"
            else selector.group(1)}


def webhook_paths(manager):
    src = go_sources(manager, "webhook/server")
    found = re.findall(r'(\w+Path)\s*=\s*"(/v1/webhook/)"\s*\+\s*admission\.(\w+)|(\w+Path)\s*=\s*"(/v1/webhook/\w+)"',
                       src)
    adm = constants(go_sources(manager, "webhook/admission"))
    out = []
    for a, prefix, const, b, path in found:
        out.append(prefix + adm[const] if a else path)
    if not out:
        raise Missing("webhook/server: no webhook paths")
    return sorted(out)


def main(argv):
    if len(argv) != 4:
        sys.exit("usage: longhorn-extract.py LONGHORN_TREE MANAGER_TREE OUT_DIR")
    longhorn, manager, out_dir = argv[1:]
    try:
        with open(os.path.join(longhorn, "chart/Chart.yaml"), encoding="utf-8") as f:
            version = yaml.safe_load(f)["appVersion"]
        consts = constants(go_sources(manager, "types") + go_sources(manager, "k8s/pkg/apis/longhorn/v1beta2"))
        consts["DataEngineTypeV1"], consts["DataEngineTypeV2"] = "v1", "v2"
        consts[""] = go_sources(manager, "types")  # for integer constants (strconv.Itoa)
        all_settings, policies = settings(manager, consts)
        chart, persistence = chart_settings(longhorn)
        facts = {
            "version": version,
            "settings": all_settings,
            "nodeDrainPolicies": policies,
            "chartDefaultSettings": chart,
            "chartPersistence": persistence,
            "instanceManagerPodLabels": labels(manager, consts),
            "storageNetwork": network(manager, consts),
            "instanceManagerPdb": pdb(manager),
            "webhookPaths": webhook_paths(manager),
        }
        schemas = crds(longhorn)
    except (OSError, KeyError, Missing, yaml.YAMLError) as e:
        print(f"longhorn-extract.py: {e!r}", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    for name, data in [("crds.json", schemas), ("longhorn.json", facts)]:
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
