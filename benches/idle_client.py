#!/usr/bin/env python3
"""Opens N connections to 127.0.0.1:PORT, sends one request on each (HTTP/1.1
keep-alive, or HTTP/2 with prior knowledge; tls-h1 and tls-h2 the same over
TLS, chosen by ALPN, the certificate not checked) and reads its whole answer,
then holds them all open and idle. Prints "ready N" once every connection has
had its answer, then waits for stdin to close (benches/idle.sh reads the
server's memory meanwhile).

  idle_client.py PORT N http1|h2|tls-h1|tls-h2

Only the standard library: HTTP/2 is written by hand (a preface, SETTINGS,
one HEADERS frame with static-table HPACK, and an ACK of the server's
SETTINGS), which is all one GET needs.
"""

import asyncio
import ssl
import struct
import sys

REQUEST_H1 = b"GET / HTTP/1.1\r\nHost: bench.test\r\n\r\n"

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


# HPACK (RFC 7541 appendix A): :method GET (2), :scheme http (6) or https (7),
# :path / (4), :authority literal without indexing (name index 1).
AUTHORITY = b"bench.test"


def request_h2(tls):
    block = bytes([0x82, 0x87 if tls else 0x86, 0x84, 0x01, len(AUTHORITY)]) + AUTHORITY
    return PREFACE + frame(0x4, 0, 0) + frame(0x1, 0x5, 1, block)


def tls_context(alpn):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols([alpn])
    return context


async def open_connection(port, alpn):
    if alpn is None:
        return await asyncio.open_connection("127.0.0.1", port)
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls_context(alpn), server_hostname="bench.test"
    )
    chosen = writer.get_extra_info("ssl_object").selected_alpn_protocol()
    if chosen != alpn:
        raise RuntimeError(f"the server chose {chosen!r} by ALPN, not {alpn!r}")
    return reader, writer


async def http1(port, alpn=None):
    reader, writer = await open_connection(port, alpn)
    writer.write(REQUEST_H1)
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    if not head.startswith(b"HTTP/1.1 2"):
        raise RuntimeError(f"not a 2xx: {head[:40]!r}")
    await reader.readexactly(length)
    return writer


async def h2(port, alpn=None):
    reader, writer = await open_connection(port, alpn)
    writer.write(request_h2(tls=alpn is not None))
    done = False
    while not done:
        header = await reader.readexactly(9)
        length = int.from_bytes(header[:3], "big")
        kind, flags = header[3], header[4]
        stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
        await reader.readexactly(length)
        if kind == 0x4 and not flags & 0x1:
            writer.write(frame(0x4, 0x1, 0))  # ACK the server's SETTINGS
        elif kind == 0x7:
            raise RuntimeError("GOAWAY")
        elif kind in (0x0, 0x1) and stream == 1 and flags & 0x1:
            done = True  # END_STREAM on the response
    return writer


async def main():
    port, count, proto = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    connect = {
        "http1": http1,
        "h2": h2,
        "tls-h1": lambda port: http1(port, "http/1.1"),
        "tls-h2": lambda port: h2(port, "h2"),
    }[proto]
    writers = []
    # A few hundred at a time: the listen backlog is finite.
    for start in range(0, count, 200):
        batch = [connect(port) for _ in range(start, min(count, start + 200))]
        writers.extend(await asyncio.gather(*batch))
    print(f"ready {len(writers)}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for writer in writers:
        writer.close()


asyncio.run(main())
