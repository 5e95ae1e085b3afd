"""tests/redis_process.py: a start that fails leaves no redis-server running, neither the nodes of a
cluster started before the one that failed nor a server that ran but never answered."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import test_redis_process_ports
from tests.redis_process import RedisClusterProcesses, RedisProcess, free_port

Started = list[tuple[int, "subprocess.Popen[bytes]"]]


taken = test_redis_process_ports.taken  # fixture: a loopback port another listener holds


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[Started]:
    """(port, process) of every redis-server a RedisProcess spawns; any still running at the end is killed
    (so a failing test leaves none behind either)."""
    seen: Started = []
    spawn = RedisProcess._spawn_and_wait

    def spying(self: RedisProcess) -> bool:
        try:
            return spawn(self)
        finally:
            assert self.proc is not None
            seen.append((self.port, self.proc))

    monkeypatch.setattr(RedisProcess, "_spawn_and_wait", spying)
    yield seen
    for _, proc in seen:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def refused(port: int) -> bool:
    """Whether nothing listens on the loopback ``port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_cluster_node_that_does_not_start_stops_the_nodes_started_before_it(
    tmp_path: Path, taken: int, spawned: Started
) -> None:
    cluster = RedisClusterProcesses(tmp_path / "cluster")
    last = cluster.nodes[-1]
    cluster.nodes[-1] = RedisProcess(last.data_dir, extra_args=last.extra_args, port=taken)  # its port held
    with pytest.raises(RuntimeError, match=f"redis-server on port {taken} did not start: .*Address already in use"):
        cluster.start()
    assert [port for port, _ in spawned] == [node.port for node in cluster.nodes]  # the first two did start
    for port, proc in spawned[:2]:
        assert proc.poll() is not None, f"the node on port {port} still runs"
        assert refused(port) and refused(port + 10_000)  # its port and its cluster bus port are free
    assert [node.proc for node in cluster.nodes] == [None, None, None]


def test_a_server_that_runs_but_never_answers_is_killed(tmp_path: Path, spawned: Started) -> None:
    silent = tmp_path / "silent-server"
    silent.write_text("#!/bin/sh\nexec sleep 60\n")  # takes redis-server's arguments, runs, answers nothing
    silent.chmod(0o755)
    server = RedisProcess(tmp_path / "redis", port=free_port(), binary=str(silent))
    server.answer_within_s = 0.5
    with pytest.raises(RuntimeError, match=f"redis-server on port {server.port} did not start"):
        server.start()
    [(_, proc)] = spawned
    assert proc.poll() is not None, "the server that never answered still runs"
    assert server.proc is None
