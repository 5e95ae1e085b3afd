"""A turn append whose Redis write timed out may have landed (Redis frozen, not down): the 503 says
"unknown", and a plain retry journals the turns twice. With an ``Idempotency-Key`` the retry is
acknowledged without appending again (issue 15's "the retry lands exactly once", H3's probe of a
frozen Redis under ``agtos serve``); the same key with other turns is a 422."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from agtos.config import Settings
from tests.helpers import user
from tests.redis_process import RedisProcess
from tests.test_durability import api, journal, messages, turns_body

FIRST, SECOND = "I booked the 9:40 train to Leeds.", "Please remind me to buy a seat reservation."


def test_a_retry_after_a_timed_out_append_lands_once(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path / "redis").start()
    assert server.proc is not None
    settings = Settings(redis_url=server.url, key_prefix="idem", data_dir=tmp_path, redis_timeout_s=0.3)
    url = "/api/memory/sessions/s1/turns"
    keyed = {**user("alice"), "Idempotency-Key": "0b6f1c9e-retry-1"}
    try:
        with api(settings) as client:
            assert client.post(url, json=turns_body(FIRST), headers=user("alice")).status_code == 200
            os.kill(server.proc.pid, signal.SIGSTOP)  # frozen: the write is sent, its answer never comes
            try:
                timed_out = client.post(url, json=turns_body(SECOND), headers=keyed)
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            assert timed_out.status_code == 503
            for _ in range(2):  # the retry after the 503, and one after a lost response
                retried = client.post(url, json=turns_body(SECOND), headers=keyed)
                assert retried.status_code == 200, retried.text
                assert retried.json()["appended"] == 1 and retried.json()["journalLength"] == 2
            assert journal(server.url, "idem", "s1") == [FIRST, SECOND]
            assert messages(client, "s1") == [FIRST, SECOND]
            reused = client.post(url, json=turns_body("Something else entirely."), headers=keyed)
            assert reused.status_code == 422 and "Idempotency-Key" in reused.json()["message"]
            repeated = client.post(url, json=turns_body(SECOND), headers=user("alice"))  # no key: a new turn
            assert repeated.status_code == 200 and repeated.json()["journalLength"] == 3
    finally:
        server.stop()
