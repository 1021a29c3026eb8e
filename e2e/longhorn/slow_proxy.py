"""A slow API path for one client, for e2e/longhorn/latestatus.sh: a TCP proxy on 127.0.0.1:PORT
to HOST:BACKEND that holds every chunk the client sends for DELAY seconds before passing it on
(in order; the answers come back at once). Behind TLS and HTTP/2 each request is one or more
chunks, so each of Multus's calls to the API server, its status write too, arrives DELAY
seconds late. Prints one line per connection.

    slow_proxy.py PORT HOST BACKEND DELAY
"""

import asyncio
import sys
import time

port, host, backend, delay = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])


async def pipe(reader, writer, hold):
    try:
        while data := await reader.read(65536):
            if hold:
                await asyncio.sleep(hold)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def serve(client_r, client_w):
    print(f"{time.time():.3f} connection from {client_w.get_extra_info('peername')}", flush=True)
    try:
        server_r, server_w = await asyncio.open_connection(host, backend)
    except OSError as e:
        print(f"{time.time():.3f} backend {host}:{backend}: {e}", flush=True)
        client_w.close()
        return
    await asyncio.gather(pipe(client_r, server_w, delay), pipe(server_r, client_w, 0))


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


asyncio.run(main())
