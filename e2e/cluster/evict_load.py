#!/usr/bin/env python3
"""Dry-run evictions through the API server at a steady rate (e2e/cluster.sh, check c).

  evict_load.py --server URL --ca CA --cert CRT --key KEY --pod NS/NAME [--pod ...] \
      --rate 60 --stop-file FILE [--max-seconds 600]

Sends POST .../pods/NAME/eviction?dryRun=All, cycling through the pods, at RATE a second
(a fixed schedule, several kept-alive connections) until STOP-FILE exists, and prints one JSON
line: sent, answered (201 allowed, 429 denied: the webhook's or a PodDisruptionBudget's
answer), failed (anything else: 500 "failed calling webhook", other codes, timeouts, connection
errors), the achieved rate, and the first few failures. Exit 0 when it ran, 2 on bad arguments.
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
        bodies.append((f"/api/v1/namespaces/{ns}/pods/{name}/eviction?dryRun=All", body))
    ticks = queue.Queue()
    lock = threading.Lock()
    counts = {"sent": 0, "allowed": 0, "denied": 0, "failed": 0}
    failures = []

    def worker():
        conn = None
        while True:
            item = ticks.get()
            if item is None:
                return
            path, body = item
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
            with lock:
                counts["sent"] += 1
                if status == 201:
                    counts["allowed"] += 1
                elif status == 429:
                    counts["denied"] += 1
                else:
                    counts["failed"] += 1
                    if len(failures) < 5:
                        failures.append(f"{status} {text[:300]}")

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
                      "rate": round(counts["sent"] / elapsed, 1) if elapsed else 0, "failures": failures}))


if __name__ == "__main__":
    main()
