"""README "Configuration": ``REDIS_URL`` with a scheme the service cannot serve stops every command at start with one
line naming the variable and every scheme it takes (exit 2). Before, the command went on and failed at its first Redis
call with redis-py's "Redis could not be started: … (redis://, rediss://, unix://)" (exit 1), a list without the
``redis+cluster://`` the README offers; the URL itself is not echoed, since it may hold a password."""

from __future__ import annotations

import pytest

from agtos.config import Settings, SettingsError
from tests import test_env_settings
from tests.test_settings_start_errors import agtos

env = test_env_settings.env  # fixture: a clean environment with the test Redis and namespace

LINE = (
    "agtos: invalid setting: REDIS_URL must start with redis://, rediss://, unix://, redis+cluster://, "
    "rediss+cluster:// (the value is not shown)"
)


@pytest.mark.parametrize("url", ["notaurl", "http://admin:s3cret-pw@cache.internal:6379/0", "redis:/host:6379", "://x"])
def test_an_unservable_redis_url_ends_a_command_with_one_line_and_no_password(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    env.setenv("REDIS_URL", url)
    code, out, err = agtos(capsys, "keys", "list")
    assert code == 2, err
    assert err.strip().splitlines() == [LINE]
    assert "s3cret" not in out + err


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost:6379/0",
        "REDIS://localhost:6379/0",
        "rediss://user:pw@cache.example.com:6380/1",
        "unix:///run/redis/redis.sock",
        "redis+cluster://node1:7000",
        "rediss+cluster://node1:7000",
        "",
    ],
)
def test_every_scheme_the_readme_names_is_taken(env: pytest.MonkeyPatch, url: str) -> None:
    env.setenv("REDIS_URL", url)
    assert Settings.from_env().redis_url in (url, None)


def test_the_error_is_a_settings_error(env: pytest.MonkeyPatch) -> None:
    env.setenv("REDIS_URL", "memcached://localhost")
    with pytest.raises(SettingsError, match=r"^REDIS_URL must start with redis://"):
        Settings.from_env()
