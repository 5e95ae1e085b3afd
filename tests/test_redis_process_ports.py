"""tests/redis_process.py: a private redis-server whose chosen port (or cluster bus port) was taken
before it bound it starts on another port; a fixed port taken says why it did not start."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.redis_process import RedisProcess, free_cluster_port, free_port

CLUSTER_ARGS = ("--cluster-enabled", "yes", "--cluster-node-timeout", "2000")


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port some other process listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def chooser(*ports: int) -> tuple[list[int], Callable[[], int]]:
    """A port chooser handing out ``ports`` in order, and the list of those it handed out."""
    handed: list[int] = []
    queue = list(ports)

    def choose() -> int:
        handed.append(queue.pop(0))
        return handed[-1]

    return handed, choose


@pytest.fixture
def other_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    """Another private redis-server, on a port of its own."""
    server = RedisProcess(tmp_path / "other").start()
    yield server
    server.stop()


@pytest.mark.parametrize("by", ["a listener", "another redis-server"])
def test_a_server_whose_chosen_port_was_taken_starts_on_another_and_keeps_it(
    request: pytest.FixtureRequest, tmp_path: Path, taken: int, by: str
) -> None:
    taken = request.getfixturevalue("other_redis").port if by == "another redis-server" else taken
    spare = free_port()
    handed, choose = chooser(taken, spare)
    server = RedisProcess(tmp_path / "redis", choose_port=choose)
    try:
        assert (handed, server.start().port) == ([taken, spare], spare)
        assert server.proc is not None and redis.Redis(port=spare).info("server")["process_id"] == server.proc.pid
        server.stop()
        assert server.start().port == spare  # a restart: the port its clients know
    finally:
        server.stop()


def test_a_cluster_node_whose_bus_port_was_taken_starts_on_another_port(tmp_path: Path) -> None:
    with socket.socket() as bus:
        port = free_cluster_port()
        bus.bind(("127.0.0.1", port + 10_000))  # the node's cluster bus port, taken
        bus.listen()
        spare = free_cluster_port({port, port + 10_000})
        _, choose = chooser(port, spare)
        node = RedisProcess(tmp_path / "node", extra_args=CLUSTER_ARGS, choose_port=choose)
        try:
            assert node.start().port == spare
        finally:
            node.stop()


def test_a_fixed_port_taken_fails_at_once_and_says_why(tmp_path: Path, taken: int) -> None:
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=f"redis-server on port {taken} did not start: .*Address already in use"):
        RedisProcess(tmp_path / "redis", port=taken).start()
    assert time.monotonic() - started < 5  # not the 10 s wait for an answer
