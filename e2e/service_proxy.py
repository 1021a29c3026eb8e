"""A Service in front of several API servers, for e2e/faults-cluster.sh: a TCP proxy on
127.0.0.1:PORT that sends each new connection to the first backend in service. A backend is out
of service from a failed /readyz (checked every 0.5 s) until OUT seconds of it answering ok
again: an API server that cannot write its lease through etcd loses its place in
`kubernetes.default.svc` for that long, though its /readyz may answer ok now and then. Open
connections stay where they went. Prints each change of a backend's state.

    service_proxy.py PORT CA CERT KEY BACKEND_PORT...
"""

import asyncio
import ssl
import sys
import time
import urllib.request

port, ca, cert, key, *backends = sys.argv[1:]
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(cert, key)
OUT = 15.0
healthy = {b: False for b in backends}
failed_at = {b: 0.0 for b in backends}


def ready(b):
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{b}/readyz", context=ctx, timeout=1) as r:
            return r.read().strip() == b"ok"
    except Exception:
        return False


async def check():
    loop = asyncio.get_running_loop()
    while True:
        for b in backends:
            ok = await loop.run_in_executor(None, ready, b)
            if not ok:
                failed_at[b] = time.time()
            now = ok and time.time() - failed_at[b] >= OUT
            if now != healthy[b]:
                print(f"{time.time():.3f} backend {b} {'in service' if now else 'out of service'}", flush=True)
            healthy[b] = now
        await asyncio.sleep(0.5)


async def pipe(r, w):
    try:
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
    except Exception:
        pass
    finally:
        w.close()


async def serve(r, w):
    b = next((b for b in backends if healthy[b]), backends[0])
    try:
        br, bw = await asyncio.open_connection("127.0.0.1", int(b))
    except OSError:
        w.close()
        return
    await asyncio.gather(pipe(r, bw), pipe(br, w))


async def main():
    asyncio.get_running_loop().create_task(check())
    server = await asyncio.start_server(serve, "127.0.0.1", int(port))
    async with server:
        await server.serve_forever()


asyncio.run(main())
