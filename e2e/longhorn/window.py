#!/usr/bin/env python3
"""The data, the sampler and the figures of the maintenance window (e2e/longhorn/window.sh).

  window.py expected SIZE SEED MIB          sha256 of a volume's logical content: MIB MiB of
                                            the data of SEED, zeros up to SIZE bytes
  window.py write LONGHORN VOLUME SIZE SEED MIB PORT DIR...
                                            writes that data through Longhorn's own engine and
                                            replicas (the engine's `rest` frontend), reads it
                                            back through the engine, stops them
  window.py write-heads SEED MIB DIR...     the same data into each replica's head file
  window.py digest SIZE DIR                 sha256 of a replica directory's logical content
  window.py sample OUT STOP [KUBECTL...]    once a second, each volume's state into OUT, until
                                            the file STOP exists
  window.py sample-once FILE                the sample lines of a snapshot (a v1 List)
  window.py report SAMPLES EVENTS           the window's figures
  window.py plan PLAN_JSON EVENTS           `check drain --all --output json` against what the
                                            drainer met

The data path. Longhorn's manager starts an engine with a block-device frontend (tgt-blockdev,
which needs iSCSI; ublk, nvmf) or none: the Volume's spec.frontend is an enum of blockdev,
iscsi, nvmf, ublk and "" (longhorn-manager k8s/pkg/apis/longhorn/v1beta2/volume.go), and this
kernel has neither iSCSI nor ublk. The engine binary has two frontends more that need no kernel
support (longhorn-engine pkg/controller/init_frontend.go): `socket` (Longhorn's dataconn
protocol on /var/run/longhorn-VOLUME.sock) and `rest` (HTTP readat/writeat on localhost:9414).
Longhorn never starts them, so `write` runs the engine binary itself, the way the instance
manager runs it (`longhorn --volume-name V replica DIR --size S --disableRevCounter ...` on each
replica directory, `longhorn --volume-name V controller V --frontend rest --replica tcp://...`),
on the directories of a detached volume, while no instance manager runs them: the bytes go
through Longhorn's own engine and replica code into Longhorn's own files. `write-heads` (what
scenario c does) is kept for a run where that fails.

The data check. `digest` reads a replica directory as the replica serves it: the chain from
volume.meta's Head through each disk's .meta Parent, each block from the newest file of the
chain that holds data there (SEEK_DATA/SEEK_HOLE: the extents Longhorn's own replica reads),
zeros where none does, over the whole volume size. The expected digest comes from the seed, never
from a replica. A replica that lost data cannot match: a lost block reads as a hole (zeros) or
as an older snapshot's bytes, a lost file breaks the chain (exit 2), and either changes the
SHA-256 of the whole content; only a replica holding every byte of the written data, and nothing
else, gives the expected digest.
Exit 0 done, 1 a check failed (a read-back that differs, a replica that would not start),
2 bad input.
"""
import base64
import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

MIB = 1 << 20
REST = "http://localhost:9414"


def chunks(seed, mib):
    """MIB chunks of 1 MiB: the data of SEED, the same on every call."""
    rnd = random.Random(seed)
    for _ in range(mib):
        yield rnd.randbytes(MIB)


def expected(size, seed, mib):
    h = hashlib.sha256()
    for c in chunks(seed, mib):
        h.update(c)
    zeros(h, size - mib * MIB)
    return h.hexdigest()


def zeros(h, n):
    z = bytes(MIB)
    while n > 0:
        h.update(z[:min(n, MIB)])
        n -= MIB


# --- the data path -------------------------------------------------------------------------

def port_free(p):
    with socket.socket() as s:
        # As Go's listeners do: a port left in TIME_WAIT by the last run is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            return False
    return True


def wait_port(p, proc, seconds=30):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            return False
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", p)) == 0:
                return True
        time.sleep(0.2)
    return False


def rest(volume, action, body):
    """One call of the rest frontend's API (longhorn-engine pkg/frontend/rest: the volume's id
    is the base64 of its name)."""
    req = urllib.request.Request(f"{REST}/v1/volumes/{base64.b64encode(volume.encode()).decode()}?action={action}",
                                 data=json.dumps(body).encode(), headers={"Content-Type": "application/json"},
                                 method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def stop(procs):
    """The controller first (it closes its replicas), then the replicas; SIGKILL after 20 s."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def write(longhorn, volume, size, seed, mib, port, dirs, log):
    """Starts a replica on each of DIRS and an engine with the rest frontend over them, writes
    the data of SEED, reads it back through the engine; True when every byte came back."""
    ports = [port + 10 * i for i in range(len(dirs))]
    cport = port + 10 * len(dirs)
    busy = [p for p in ports + [cport] + [9414] if not port_free(p)]
    if busy:
        print(f"window.py: ports in use: {busy}", file=sys.stderr)
        return False
    procs = []
    try:
        for d, p in zip(dirs, ports):
            procs.append(subprocess.Popen(
                [longhorn, "--volume-name", volume, "replica", d, "--size", str(size), "--disableRevCounter",
                 "--listen", f"127.0.0.1:{p}", "--sync-agent-port-count", "5"], stdout=log, stderr=log))
            if not wait_port(p, procs[-1]):
                print(f"window.py: the replica on {d} did not start (see the log)", file=sys.stderr)
                return False
        ctl = subprocess.Popen(
            [longhorn, "--volume-name", volume, "controller", volume, "--frontend", "rest", "--disableRevCounter",
             "--size", str(size), "--current-size", str(size), "--listen", f"127.0.0.1:{cport}"] +
            sum((["--replica", f"tcp://127.0.0.1:{p}"] for p in ports), []), stdout=log, stderr=log)
        procs.insert(0, ctl)
        if not wait_port(9414, ctl):
            print("window.py: the engine's rest frontend did not start (see the log)", file=sys.stderr)
            return False
        want = hashlib.sha256()
        for i, c in enumerate(chunks(seed, mib)):
            rest(volume, "writeat", {"offset": i * MIB, "length": len(c), "data": base64.b64encode(c).decode()})
            want.update(c)
        got = hashlib.sha256()
        for i in range(mib):
            out = rest(volume, "readat", {"offset": str(i * MIB), "length": str(MIB)})
            got.update(base64.b64decode(out["data"]))
        if got.hexdigest() != want.hexdigest():
            print(f"window.py: {volume}: read back {got.hexdigest()} through the engine, wrote {want.hexdigest()}",
                  file=sys.stderr)
            return False
        return True
    finally:
        stop(procs)


def write_heads(seed, mib, dirs):
    for d in dirs:
        head = head_of(d)
        with open(os.path.join(d, head), "r+b") as f:
            for c in chunks(seed, mib):
                f.write(c)
            f.flush()
            os.fsync(f.fileno())


# --- the data check ------------------------------------------------------------------------

def head_of(d):
    with open(os.path.join(d, "volume.meta"), encoding="utf-8") as f:
        head = json.load(f).get("Head") or ""
    if not head:
        raise ValueError(f"{d}/volume.meta names no head")
    return head


def chain(d):
    """The disk files of replica directory D, newest (the head) first."""
    out, name = [], head_of(d)
    while name:
        if name in out or len(out) > 1000:
            raise ValueError(f"{d}: the snapshot chain loops at {name}")
        out.append(name)
        with open(os.path.join(d, name + ".meta"), encoding="utf-8") as f:
            name = json.load(f).get("Parent") or ""
    return out


def extents(path, size):
    """[start, end) of each data extent of PATH below SIZE."""
    out, off = [], 0
    with open(path, "rb") as f:
        fd = f.fileno()
        while off < size:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:  # ENXIO: no data after off
                break
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            if start >= size:
                break
            out.append((start, end))
            off = end
    return out


def layout(d, size):
    """Sorted (start, end, file) pieces: each range served by the newest file holding data."""
    pieces = []  # disjoint, sorted
    for name in reversed(chain(d)):  # oldest first: a newer file overwrites
        for s, e in extents(os.path.join(d, name), size):
            kept = []
            for ps, pe, pf in pieces:
                if pe <= s or ps >= e:
                    kept.append((ps, pe, pf))
                    continue
                if ps < s:
                    kept.append((ps, s, pf))
                if pe > e:
                    kept.append((e, pe, pf))
            kept.append((s, e, name))
            pieces = sorted(kept)
    return pieces


def digest(size, d):
    h, off = hashlib.sha256(), 0
    files = {}
    try:
        for s, e, name in layout(d, size):
            zeros(h, s - off)
            f = files.get(name) or files.setdefault(name, open(os.path.join(d, name), "rb"))
            f.seek(s)
            n = e - s
            while n > 0:
                b = f.read(min(n, MIB))
                if not b:
                    raise ValueError(f"{d}/{name}: short read at {e - n}")
                h.update(b)
                n -= len(b)
            off = e
        zeros(h, size - off)
    finally:
        for f in files.values():
            f.close()
    return h.hexdigest()


# --- the sampler ---------------------------------------------------------------------------

def sample_lines(items, now):
    """One line per Volume: EPOCH VOLUME STATE ROBUSTNESS HEALTHY/WANTED REBUILDING, where
    HEALTHY counts its replicas with healthyAt and no failedAt, and REBUILDING lists the
    engine's rebuilds in progress (replica address:progress) or '-'."""
    vols = {o["metadata"]["name"]: o for o in items if o.get("kind") == "Volume"}
    healthy = {}
    for o in items:
        if o.get("kind") != "Replica":
            continue
        spec = o.get("spec") or {}
        v = spec.get("volumeName") or (o["metadata"].get("labels") or {}).get("longhornvolume", "")
        if spec.get("healthyAt") and not spec.get("failedAt"):
            healthy[v] = healthy.get(v, 0) + 1
    rebuilding = {}
    for o in items:
        if o.get("kind") != "Engine":
            continue
        v = (o.get("spec") or {}).get("volumeName", "")
        for addr, st in sorted(((o.get("status") or {}).get("rebuildStatus") or {}).items()):
            if st.get("isRebuilding"):
                rebuilding.setdefault(v, []).append(f"{addr}:{st.get('progress', 0)}")
    out = []
    for name in sorted(vols):
        st = vols[name].get("status") or {}
        want = (vols[name].get("spec") or {}).get("numberOfReplicas", 0)
        out.append(f"{now:.0f} {name} {st.get('state') or '-'} {st.get('robustness') or '-'} "
                   f"{healthy.get(name, 0)}/{want} {','.join(rebuilding.get(name, [])) or '-'}")
    return out


def sample(out, stop, kubectl):
    cmd = kubectl + ["-n", "longhorn-system", "get", "volumes.longhorn.io,replicas.longhorn.io,engines.longhorn.io",
                     "-o", "json"]
    with open(out, "a", encoding="utf-8") as f:
        while not os.path.exists(stop):
            t = time.time()
            try:
                r = subprocess.run(cmd, capture_output=True, timeout=10, check=False)
                items = json.loads(r.stdout).get("items", []) if r.returncode == 0 else None
            except (subprocess.TimeoutExpired, ValueError):
                items = None
            if items is None:
                f.write(f"{t:.0f} - unanswered\n")
            else:
                f.writelines(line + "\n" for line in sample_lines(items, t))
            f.flush()
            time.sleep(max(0.0, 1.0 - (time.time() - t)))


# --- the figures ---------------------------------------------------------------------------

def read_samples(path):
    """{volume: [(t, state, robustness, healthy, rebuilding)]}; unanswered seconds skipped."""
    vols = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            p = line.split()
            if len(p) != 6:
                continue
            vols.setdefault(p[1], []).append((int(p[0]), p[2], p[3], int(p[4].split("/")[0]), p[5]))
    return vols


def spans(rows, pred):
    """Seconds (sample to next sample) while PRED holds, and the number of separate spans."""
    total, n, inside = 0, 0, False
    for (t, *rest), nxt in zip(rows, rows[1:] + [None]):
        on = pred(t, *rest)
        if on:
            total += (nxt[0] - t) if nxt else 1
            n += 0 if inside else 1
        inside = on
    return total, n


def rebuilds(rows):
    """(replica address, seconds from the first sample it rebuilt in to the first without it)."""
    out, open_ = [], {}
    for t, *_, rb in rows:
        now = set() if rb == "-" else {x.rsplit(":", 1)[0] for x in rb.split(",")}
        for a in now - set(open_):
            open_[a] = t
        for a in set(open_) - now:
            out.append((a, t - open_.pop(a)))
    out += [(a + " (unfinished)", rows[-1][0] - t) for a, t in open_.items()]
    return out


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def report(samples, events):
    vols = read_samples(samples)
    ev = [line.split(" ", 2) for line in read_lines(events) if line.strip()]
    ev = [(float(e[0]), e[1], e[2] if len(e) > 2 else "") for e in ev]
    lines = []
    start = next((t for t, k, _ in ev if k == "window-start"), None)
    end = next((t for t, k, _ in ev if k == "window-end"), None)
    lines.append(f"window: {end - start:.0f} s" if start is not None and end is not None else "window: not ended")
    cordon = {}
    for t, k, a in ev:
        if k == "cordon":
            cordon[a] = t
        elif k in ("drained", "stuck") and a in cordon:
            lines.append(f"{a}: cordon to {'drained' if k == 'drained' else 'STUCK (no progress)'} "
                         f"{t - cordon.pop(a):.0f} s")
    faulted = sorted(v for v, rows in vols.items() if any(r[2] == "faulted" for r in rows))
    lines.append(f"faulted volumes: {len(faulted)}{' (' + ' '.join(faulted) + ')' if faulted else ''}")
    for v, rows in sorted(vols.items()):
        deg, ndeg = spans(rows, lambda t, s, r, h, rb: r == "degraded")
        none, nnone = spans(rows, lambda t, s, r, h, rb: h == 0)
        rb = rebuilds(rows)
        lines.append(f"{v}: degraded {deg} s in {ndeg} spans; no healthy replica {none} s in {nnone} spans; "
                     f"rebuilds {len(rb)}: " + (" ".join(f"{a}={s}s" for a, s in rb) or "-"))
    return lines, len(faulted)


def cause(reason, node):
    """What a refusal of NODE's drain waited on, from the guard's reason for one volume."""
    if f"attached to {node}" in reason:
        return "workload"
    if "instance manager" in reason:
        return "instance manager starting"
    if "rebuil" in reason or "failed " in reason:
        return "rebuild"
    return "other"


def plan(plan_json, events):
    """Each node's predicted waits (the table's and the rolling window's, check drain --all)
    beside what its first drain met: each volume with the causes of its refusals (its
    workload, a rebuild, an instance manager starting) and whether the drainer had moved its
    workload onto the node before that drain."""
    with open(plan_json, encoding="utf-8") as f:
        p = json.load(f)
    first_cordon, moved_here, met = {}, {}, {}
    for line in read_lines(events):
        e = line.split(" ", 2)
        if len(e) != 3:
            continue
        kind, rest = e[1], e[2]
        if kind == "cordon":
            first_cordon.setdefault(rest, True)
        elif kind == "move":
            f = rest.split(" ")
            if len(f) >= 3 and f[2] not in first_cordon:
                moved_here.setdefault(f[2], set()).add(f[0])
        elif kind == "refused":
            node, _, what = rest.partition(" ")
            vol, _, reason = what.lstrip("- ").partition(":")
            met.setdefault(node, {}).setdefault(vol, set()).add(cause(reason, node))
    rolling = {w.get("node"): (w.get("rebuilds") or [], w.get("rebuildsFromSecondRound") or [])
               for w in p.get("rolling") or []}
    lines = [f"plan batch: {' '.join(p.get('batch') or []) or '-'}"]
    for n in p.get("nodes") or []:
        node = n.get("node", "?")
        waits = sorted({w[0] for w in n.get("waitsFor") or [] if w})
        first, later = rolling.get(node, ([], []))
        seen = met.get(node, {})
        got = [f"{v} ({', '.join(sorted(seen[v]))}{'; moved here' if v in moved_here.get(node, ()) else ''})"
               for v in sorted(seen)]
        lines.append(f"{node}: plan {'drainable now' if n.get('drainableNow') else 'waits for ' + ' '.join(waits)}"
                     f"; rolling: {' '.join(first) or '-'}{' (later rounds: ' + ' '.join(later) + ')' if later else ''}"
                     f"; met: {' '.join(got) or 'no refusal'}")
    return lines


def load_list(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("items", [])


def main(argv):
    cmd, args = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    try:
        if cmd == "expected" and len(args) == 3:
            print(expected(int(args[0]), args[1], int(args[2])))
        elif cmd == "write" and len(args) >= 7:
            ok = write(args[0], args[1], int(args[2]), args[3], int(args[4]), int(args[5]), args[6:], sys.stderr)
            return 0 if ok else 1
        elif cmd == "write-heads" and len(args) >= 3:
            write_heads(args[0], int(args[1]), args[2:])
        elif cmd == "digest" and len(args) == 2:
            print(digest(int(args[0]), args[1]))
        elif cmd == "sample" and len(args) >= 2:
            sample(args[0], args[1], args[2:] or ["kubectl"])
        elif cmd == "sample-once" and len(args) == 1:
            print("\n".join(sample_lines(load_list(args[0]), time.time())))
        elif cmd == "report" and len(args) == 2:
            lines, faulted = report(*args)
            print("\n".join(lines))
            return 1 if faulted else 0
        elif cmd == "plan" and len(args) == 2:
            print("\n".join(plan(*args)))
        else:
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
    except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError) as e:
        print(f"window.py {cmd}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
