"""``agtos keys …``: create, list and revoke API keys (stored hashed in Redis), and the serve-time auth check."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import typer
from rich.console import Console
from rich.table import Table

from agtos.config import Settings
from agtos.storage.api_keys import ApiKeyStore
from agtos.storage.keys import GlobalKeys, InvalidIdentifier
from agtos.storage.redis_conn import RedisConnector, StorageUnavailable

keys_app = typer.Typer(help="API keys: once any key exists, every API call needs one.", no_args_is_help=True)
err = Console(stderr=True)


@contextmanager
def key_store(settings: Settings | None = None) -> Iterator[ApiKeyStore]:
    """The key store of the configured Redis (the embedded one is started and stopped around the call)."""
    settings = settings or Settings.from_env()
    connector = RedisConnector.from_settings(settings)
    try:
        yield ApiKeyStore(connector, GlobalKeys(settings.key_prefix))
    except StorageUnavailable as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    finally:
        connector.close()


@keys_app.command("create")
def create(
    user: str = typer.Option(None, "--user", help="a user key: acts only as this user"),
    service: str = typer.Option(None, "--service", help="a service key named NAME: acts for the user in X-User-Id"),
) -> None:
    """Create a key and print it (only the key, on stdout): it is shown once and stored hashed."""
    if (user is None) == (service is None):
        err.print("[red]give exactly one of --user USER or --service NAME[/red]")
        raise typer.Exit(2)
    with key_store() as store:
        try:
            key, record = store.create("user", user) if user is not None else store.create("service", service)
        except (InvalidIdentifier, ValueError) as exc:
            err.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from exc
    typer.echo(key)
    err.print(f"created {record.kind} key {record.id} for {record.subject}; copy it now, it is not shown again")


@keys_app.command("list")
def list_keys() -> None:
    """Every key's id, kind, user or service name and creation time (never the key)."""
    with key_store() as store:
        found = store.list()
    table = Table("id", "kind", "user / service", "created (UTC)", title=f"{len(found)} API key(s)")
    for k in found:
        table.add_row(k.id, k.kind, k.subject, datetime.fromtimestamp(k.created_at, UTC).strftime("%Y-%m-%d %H:%M"))
    Console().print(table)


@keys_app.command("revoke")
def revoke(key_id: str = typer.Argument(..., help="the id `agtos keys list` shows")) -> None:
    """Revoke a key: every API process refuses it from its next request on."""
    with key_store() as store:
        removed = store.revoke(key_id)
        left = len(store.list())
    if not removed:
        err.print(f"[red]no key with id {key_id!r}[/red]")
        raise typer.Exit(1)
    err.print(f"revoked key {key_id}")
    if not left:
        err.print("no key left: auth stays on, every API call gets 401 until a key is created (or `agtos keys off`)")


@keys_app.command("off")
def off() -> None:
    """Switch key auth off again (only once every key is revoked; AGTOS_AUTH=required still wins)."""
    with key_store() as store:
        if not store.disable():
            err.print("[red]revoke every key first (agtos keys list)[/red]")
            raise typer.Exit(1)
    err.print("key auth is off: the API serves unauthenticated calls again")


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_is_on(settings: Settings) -> bool:
    """AGTOS_AUTH=required, or a key was created (False when Redis cannot tell)."""
    if settings.auth == "required":
        return True
    connector = RedisConnector.from_settings(settings)
    try:
        return ApiKeyStore(connector, GlobalKeys(settings.key_prefix)).enabled()
    except StorageUnavailable:
        return False
    finally:
        connector.close()
