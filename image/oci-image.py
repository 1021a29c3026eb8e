#!/usr/bin/env python3
"""Write a container image without a container engine or a registry.

One layer from files on this machine, an OCI image config and manifest, packed as an OCI
image layout tar that also carries a docker-save style manifest.json, so the same file loads
with `ctr -n k8s.io images import FILE`, `docker load -i FILE` and `podman load -i FILE`.

  image/oci-image.py --out OUT.tar --name REPO:TAG \
      --file SRC:/DEST[:MODE] ... [--link /DEST:TARGET ...] [--dir /DEST[:MODE] ...] \
      [--nonroot-passwd] [--user UID:GID] [--entrypoint JSON] [--cmd JSON] [--env K=V ...] \
      [--label K=V ...] [--expose PORT/tcp ...]

The layer is reproducible: entries sorted, owner 0:0, mtime 0 (SOURCE_DATE_EPOCH when set),
gzip without name or time, so the same inputs give the same digests. Prints the image name,
the manifest digest and the sizes (layer compressed and uncompressed, the whole tar).
Exit 0 written, 2 bad arguments or unreadable input.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
PASSWD = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
GROUP = "root:x:0:\nnonroot:x:65532:\n"


def fail(msg):
    print(f"oci-image: {msg}", file=sys.stderr)
    sys.exit(2)


def split_spec(spec, parts, what):
    items = spec.split(":")
    if len(items) < parts[0] or len(items) > parts[1]:
        fail(f"bad {what} {spec!r}")
    return items


def tar_info(name, kind, mode, size=0, target=""):
    ti = tarfile.TarInfo(name.lstrip("/"))
    ti.type, ti.mode, ti.size, ti.linkname = kind, mode, size, target
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    ti.mtime = EPOCH
    return ti


def layer_bytes(args):
    """The uncompressed layer tar: parent directories, then files, links and dirs by path."""
    entries = {}

    def parents(path):
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            entries.setdefault(d, ("dir", 0o755, None))

    for spec in args.file:
        src, dest, *mode = split_spec(spec, (2, 3), "--file")
        if not os.path.isfile(src):
            fail(f"--file {spec}: {src} is not a readable file")
        parents(dest)
        perm = int(mode[0], 8) if mode else os.stat(src).st_mode & 0o777
        entries[dest.strip("/")] = ("file", perm, src)
    for spec in args.link:
        dest, target = split_spec(spec, (2, 2), "--link")
        parents(dest)
        entries[dest.strip("/")] = ("link", 0o777, target)
    for spec in args.dir:
        dest, *mode = split_spec(spec, (1, 2), "--dir")
        parents(dest + "/x")
        entries[dest.strip("/")] = ("dir", int(mode[0], 8) if mode else 0o755, None)
    if args.nonroot_passwd:
        for path, text in (("etc/passwd", PASSWD), ("etc/group", GROUP)):
            parents(path)
            entries[path] = ("text", 0o644, text.encode())
        entries.setdefault("home/nonroot", ("dir", 0o755, None))
        parents("home/nonroot")
    if not entries:
        fail("nothing to put in the layer (give --file, --link or --dir)")

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(entries):
            kind, mode, data = entries[path]
            if kind == "dir":
                tar.addfile(tar_info(path, tarfile.DIRTYPE, mode))
            elif kind == "link":
                tar.addfile(tar_info(path, tarfile.SYMTYPE, mode, target=data))
            elif kind == "text":
                tar.addfile(tar_info(path, tarfile.REGTYPE, mode, len(data)), io.BytesIO(data))
            else:
                with open(data, "rb") as f:
                    tar.addfile(tar_info(path, tarfile.REGTYPE, mode, os.fstat(f.fileno()).st_size), f)
    return buf.getvalue()


def json_list(text, flag):
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        fail(f"{flag} is not JSON: {e}")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail(f"{flag} must be a JSON list of strings")
    return value


def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--name", required=True, help="REPO:TAG, e.g. docker.io/library/pause:local")
    p.add_argument("--file", action="append", default=[])
    p.add_argument("--link", action="append", default=[])
    p.add_argument("--dir", action="append", default=[])
    p.add_argument("--nonroot-passwd", action="store_true", help="/etc/passwd and /etc/group with root and nonroot (65532)")
    p.add_argument("--user")
    p.add_argument("--entrypoint")
    p.add_argument("--cmd")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--label", action="append", default=[])
    p.add_argument("--expose", action="append", default=[])
    p.add_argument("--arch", default="amd64")
    args = p.parse_args()
    if ":" not in args.name.rsplit("/", 1)[-1]:
        fail(f"--name {args.name!r} needs a tag (REPO:TAG)")

    raw = layer_bytes(args)
    diff_id = "sha256:" + hashlib.sha256(raw).hexdigest()
    gz = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=gz, mtime=0, compresslevel=9) as g:
        g.write(raw)
    layer_digest, layer = blob(gz.getvalue())

    cfg = {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"] + args.env}
    for key, val in (("User", args.user), ("Entrypoint", json_list(args.entrypoint, "--entrypoint")),
                     ("Cmd", json_list(args.cmd, "--cmd"))):
        if val is not None:
            cfg[key] = val
    if args.label:
        cfg["Labels"] = dict(kv.split("=", 1) for kv in args.label)
    if args.expose:
        cfg["ExposedPorts"] = {port: {} for port in args.expose}
    config = {
        "architecture": args.arch,
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "image/oci-image.py"}],
    }
    config_digest, config_bytes = blob(json.dumps(config, sort_keys=True, separators=(",", ":")).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": len(config_bytes)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": len(layer)}],
    }
    manifest_digest, manifest_bytes = blob(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
    tag = args.name.rsplit(":", 1)[1]
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": manifest["mediaType"], "digest": manifest_digest, "size": len(manifest_bytes),
            "annotations": {"io.containerd.image.name": args.name, "org.opencontainers.image.ref.name": tag},
        }],
    }
    path = lambda d: "blobs/sha256/" + d.split(":", 1)[1]
    docker_manifest = [{"Config": path(config_digest), "RepoTags": [args.name], "Layers": [path(layer_digest)]}]
    files = [
        ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
        ("index.json", json.dumps(index, sort_keys=True).encode()),
        ("manifest.json", json.dumps(docker_manifest).encode()),
        (path(config_digest), config_bytes),
        (path(manifest_digest), manifest_bytes),
        (path(layer_digest), layer),
    ]
    tmp = args.out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            tar.addfile(tar_info(d, tarfile.DIRTYPE, 0o755))
        for name, data in files:
            tar.addfile(tar_info(name, tarfile.REGTYPE, 0o644, len(data)), io.BytesIO(data))
    os.replace(tmp, args.out)
    print(f"{args.name} {manifest_digest} layer {len(layer)} B gzip ({len(raw)} B tar), "
          f"archive {os.path.getsize(args.out)} B -> {args.out}")


if __name__ == "__main__":
    main()
