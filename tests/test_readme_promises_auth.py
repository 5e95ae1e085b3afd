"""README promises of the key rate limit, set by its variables (``## Authentication``, configuration):
"``AGTOS_RATE_LIMIT_PER_S`` (100) requests per second, bursts of ``AGTOS_RATE_LIMIT_BURST`` (200); past it,
429 with ``Retry-After``" and "per-key token bucket (0: no limit)". Other tests set the limit through
``Settings`` objects; here the variables are in the environment, the key comes from ``agtos keys create``
and the calls go through HTTP.
"""

from __future__ import annotations

from typer.testing import CliRunner

from agtos.cli import app
from tests import test_env_settings
from tests.test_env_settings import Serve

env = test_env_settings.env  # fixtures: a clean environment, and apps built from it
serve = test_env_settings.serve


def new_user_key(name: str) -> dict[str, str]:
    created = CliRunner().invoke(app, ["keys", "create", "--user", name])
    assert created.exit_code == 0, created.output
    return {"Authorization": f"Bearer {created.stdout.strip()}"}


def test_rate_and_burst_variables_limit_a_key(serve: Serve) -> None:
    with serve(AGTOS_RATE_LIMIT_PER_S="0.5", AGTOS_RATE_LIMIT_BURST="2") as client:
        key = new_user_key("rita")
        statuses = [client.get("/api/memory/episodes", headers=key).status_code for _ in range(2)]
        assert statuses == [200, 200]  # the burst
        limited = client.get("/api/memory/episodes", headers=key)
        assert limited.status_code == 429 and limited.headers["retry-after"] == "2"  # one token per 2 s
        other = new_user_key("otto")  # each key has its own bucket
        assert client.get("/api/memory/episodes", headers=other).status_code == 200


def test_a_rate_of_zero_is_no_limit(serve: Serve) -> None:
    with serve(AGTOS_RATE_LIMIT_PER_S="0", AGTOS_RATE_LIMIT_BURST="1") as client:
        key = new_user_key("zoe")
        statuses = {client.get("/api/memory/episodes", headers=key).status_code for _ in range(6)}
        assert statuses == {200}
