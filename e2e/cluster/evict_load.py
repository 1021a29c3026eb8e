#!/usr/bin/env python3
"""Dry-run evictions (and pod creations) through the API server at a steady rate
(e2e/cluster.sh, check c).

  evict_load.py --server URL --ca CA --cert CRT --key KEY --pod NS/NAME [--pod ...] \
      [--create NS --networks JSON] --rate 60 --stop-file FILE [--max-seconds 600]

Sends POST .../pods/NAME/eviction?dryRun=All, cycling through the pods, at RATE a second
(a fixed schedule, several kept-alive connections) until STOP-FILE exists, and prints one JSON
line: sent, answered (201 allowed, 429 denied: the webhook's or a PodDisruptionBudget's
answer), failed (anything else: 500 "failed calling webhook", other codes, timeouts, connection
errors), the achieved rate, and the first few failures. Exit 0 when it ran, 2 on bad arguments.

With --create, every other request is instead POST /api/v1/namespaces/NS/pods?dryRun=All of an
instance-manager pod that asks for the storage network JSON: the init gate's webhook
(failurePolicy Ignore) must add its init container. Such a creation is answered when the 201's
pod has the container `longhorn-guard-gate`; a 201 without it is a review the API server failed
open on, counted as failed ("ungated"). `evictions` and `creations` break the counts down.
"""
import argparse
import http.client
import json
import os
import queue
import ssl
import threading
import time
from urllib.parse import urlparse

WORKERS = 12


def main():
    p = argparse.ArgumentParser()
    for flag in ("--server", "--ca", "--cert", "--key", "--stop-file"):
        p.add_argument(flag, required=True)
    p.add_argument("--pod", action="append", required=True)
    p.add_argument("--create", metavar="NS")
    p.add_argument("--networks", default='[{"namespace":"kube-system","name":"storage-net","interface":"lhnet1"}]')
    p.add_argument("--rate", type=float, default=60)
    p.add_argument("--max-seconds", type=float, default=600)
    args = p.parse_args()
    url = urlparse(args.server)
    ctx = ssl.create_default_context(cafile=args.ca)
    ctx.load_cert_chain(args.cert, args.key)
    bodies = []
    for pod in args.pod:
        ns, name = pod.split("/", 1)
        body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}})
        bodies.append(("eviction", f"/api/v1/namespaces/{ns}/pods/{name}/eviction?dryRun=All", body))
    if args.create:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"generateName": "lg-load-", "namespace": args.create,
                            "labels": {"longhorn.io/component": "instance-manager"},
                            "annotations": {"k8s.v1.cni.cncf.io/networks": args.networks}},
               "spec": {"restartPolicy": "Never", "serviceAccountName": "longhorn-service-account",
                        "automountServiceAccountToken": False,
                        "containers": [{"name": "instance-manager", "image": "longhorn-guard-e2e-load"}]}}
        create = ("creation", f"/api/v1/namespaces/{args.create}/pods?dryRun=All", json.dumps(pod))
        bodies = [b for e in bodies for b in (e, create)]
    ticks = queue.Queue()
    lock = threading.Lock()
    counts = {"sent": 0, "allowed": 0, "denied": 0, "failed": 0}
    kinds = {k: {"sent": 0, "answered": 0, "failed": 0} for k in ("eviction", "creation")}
    failures = []

    def worker():
        conn = None
        while True:
            item = ticks.get()
            if item is None:
                return
            kind, path, body = item
            sent_at = time.time()
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=15)
                conn.request("POST", path, body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                text = resp.read().decode(errors="replace")
                status = resp.status
            except Exception as e:  # a non-answer: counted, and the connection made again
                conn = None
                status, text = 0, f"{type(e).__name__}: {e}"
            if kind == "creation" and status == 201 and "longhorn-guard-gate" not in text:
                status, text = 0, "ungated: 201 without the init gate (the webhook call failed open)"
            with lock:
                counts["sent"] += 1
                kinds[kind]["sent"] += 1
                if status in (201, 429):
                    counts["allowed" if status == 201 else "denied"] += 1
                    kinds[kind]["answered"] += 1
                else:
                    counts["failed"] += 1
                    kinds[kind]["failed"] += 1
                    if len(failures) < 5:
                        failures.append(f"{kind} sent {sent_at:.3f}, after {time.time() - sent_at:.2f} s: {status} {text[:300]}")

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    start = time.monotonic()
    n = 0
    while not os.path.exists(args.stop_file) and time.monotonic() - start < args.max_seconds:
        due = start + n / args.rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        ticks.put(bodies[n % len(bodies)])
        n += 1
    for _ in threads:
        ticks.put(None)
    for t in threads:
        t.join(timeout=30)
    elapsed = time.monotonic() - start
    answered = counts["allowed"] + counts["denied"]
    print(json.dumps({**counts, "answered": answered, "seconds": round(elapsed, 1),
                      "rate": round(counts["sent"] / elapsed, 1) if elapsed else 0,
                      "evictions": kinds["eviction"], "creations": kinds["creation"], "failures": failures}))


if __name__ == "__main__":
    main()
