"""The load benchmark runs (tiny): its own `agtos serve` in two layouts (queue mode with the worker
thread; `--no-worker` beside a separate `agtos worker` process), the mixed workload, per-endpoint
figures, no errors, the ingestion queue drained after the load, and the side-by-side table."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from benchmarks.load import split_layout


def test_load_benchmark_runs_tiny_without_errors(redis_url: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.load",
            "--clients",
            "3",
            "--duration",
            "1",  # hundreds of requests per layout, every endpoint hit; less for the queue to drain after
            "--warm",
            "1",
            "--layouts",
            "thread,process",
            "--redis-url",
            redis_url,
            "--drain-timeout",
            "120",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for layout in ("thread", "process"):
        part = out.split(f"# layout {layout}: ", 1)[1].split("# layout", 1)[0]
        assert re.search(rf"== 3 clients \[{layout}\], [\d.]+ s: \d+ requests, [\d.]+ req/s, 0 errors", part), out
        for endpoint in ("append", "search", "context", "end"):
            row = re.search(rf"^{endpoint}\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+0$", part, re.MULTILINE)
            assert row and int(row.group(1)) > 0, (layout, endpoint, out)
        assert re.search(r"server RSS \d+ MiB; ingestion queue drained: yes", part), out
    table = out.split("== side by side\n", 1)[1].splitlines()
    assert table[0].split()[:3] == ["layout", "clients", "req/s"]
    assert [row.split()[:2] for row in table[1:3]] == [["thread", "3"], ["process", "3"]]
    assert (
        "--url must be a loopback"
        in subprocess.run(
            [sys.executable, "-m", "benchmarks.load", "--url", "http://10.0.0.1:4102"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        ).stderr
    )


def test_keep_alive_client_speaks_http_as_h11_reads_it() -> None:
    """The load generator's own client (benchmarks.load.KeepAlive): its requests parsed by h11 (the
    HTTP/1.1 parser under httpx) carry the method, target, headers and JSON body; Content-Length
    and chunked replies are read whole; a reply with ``Connection: close`` makes it reconnect."""
    import asyncio

    import h11

    from benchmarks.load import HttpFailed, KeepAlive

    replies = [
        b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n",
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    ]
    seen: list[tuple[int, h11.Request, bytes]] = []
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        conn = h11.Connection(h11.SERVER)
        while replies:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                if not data:
                    break
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                request, body = event, b""
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                seen.append((connections, request, body))
                reply = replies.pop(0)
                writer.write(reply)
                await writer.drain()
                if b"Connection: close" in reply:
                    break
                left, conn = conn.trailing_data[0], h11.Connection(h11.SERVER)  # a new cycle: the reply is raw
                if left:
                    conn.receive_data(left)
        writer.close()

    async def run() -> list[tuple[int, bytes]]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = KeepAlive(f"http://127.0.0.1:{port}")
        got = []
        headers = {"X-User-Id": "u1"}
        for method, params, body in (("POST", None, {"turns": ["é"]}), ("GET", {"q": "a b&c"}, None)):
            reply = await client.request(method, "/p", headers, params, body)
            got.append((reply.status_code, reply.content))
        for _ in range(2):
            reply = await client.request("POST", "/end", headers)
            got.append((reply.status_code, reply.content))
        await client.close()
        server.close()
        failing = KeepAlive(f"http://127.0.0.1:{port}", timeout=2)
        try:
            await failing.request("GET", "/", {})
        except HttpFailed:
            got.append((-1, b"refused"))
        return got

    got = asyncio.run(run())
    assert got == [(201, b"hello"), (200, b"abcde"), (503, b"no"), (200, b""), (-1, b"refused")]
    assert [(c, r.method, r.target) for c, r, _ in seen] == [
        (1, b"POST", b"/p"),
        (1, b"GET", b"/p?q=a+b%26c"),
        (1, b"POST", b"/end"),
        (2, b"POST", b"/end"),
    ]
    first = dict(seen[0][1].headers)
    assert first[b"x-user-id"] == b"u1" and first[b"content-type"] == b"application/json"
    assert json.loads(seen[0][2]) == {"turns": ["é"]} and int(first[b"content-length"]) == len(seen[0][2])
    assert dict(seen[2][1].headers)[b"content-length"] == b"0" and seen[2][2] == b""
    assert b"content-length" not in dict(seen[1][1].headers)


def test_a_layout_carries_environment_variables_for_an_a_b() -> None:
    assert split_layout("thread") == ("thread", {})
    assert split_layout("thread+AGTOS_ACCESS_LOG=true+X=a=b") == ("thread", {"AGTOS_ACCESS_LOG": "true", "X": "a=b"})
    refused = subprocess.run(
        [sys.executable, "-m", "benchmarks.load", "--layouts", "thread+NOVALUE"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2 and "'NOVALUE': expected NAME=VALUE" in refused.stderr
