"""The ``agtos`` command line: ``agtos serve``, ``agtos memory ...``."""

from __future__ import annotations

from typing import Any

import typer

from agtos.cli_keys import auth_is_on, is_loopback, keys_app
from agtos.cli_memory import register as register_memory_commands
from agtos.cli_reindex import reindex_command
from agtos.cli_worker import IngestModeOption, serve_ingest_env, shared_embedded_redis
from agtos.cli_worker import register as register_worker_command
from agtos.cli_worker_process import WorkerLayout, cleanup_on_sigterm, invalid_setting, worker_child, worker_layout
from agtos.config import Settings, SettingsError


class _Cli(typer.Typer):
    """An invalid environment variable ends any command with its one-line message (exit 2), not a traceback."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except SettingsError as exc:
            invalid_setting(str(exc))


app = _Cli(help="agtos: memory for AI agents.", no_args_is_help=True)
memory_app = typer.Typer(help="Inspect and manage stored memory.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")
app.add_typer(keys_app, name="keys")


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="interface to bind"),
    port: int = typer.Option(None, min=1, max=65535, help="port (default AGTOS_PORT or 4102)"),
    workers: int = typer.Option(1, min=1, help="uvicorn worker processes"),
    ingest_mode: IngestModeOption = typer.Option(
        None, help="session-end ingestion: queue (default; a worker ingests) or inline (AGTOS_INGEST_MODE)"
    ),
    worker: WorkerLayout = typer.Option(
        None,
        "--worker",
        help="queue mode, where the ingestion worker runs: process (default: one `agtos worker` child at the "
        "lowest CPU priority, restarted if it dies), thread (one in each API process) or none "
        "(AGTOS_SERVE_WORKER)",
    ),
    no_worker: bool = typer.Option(False, "--no-worker", help="same as --worker none"),
    insecure: bool = typer.Option(False, "--insecure", help="serve a non-loopback host without API keys"),
    access_log: bool = typer.Option(
        None,
        "--access-log/--no-access-log",
        help="log a line per request (default AGTOS_ACCESS_LOG, else off: it costs the event loop)",
    ),
) -> None:
    """Run the memory API (embedded Redis unless REDIS_URL is set)."""
    import uvicorn

    from agtos.serving.http_protocol import PROTOCOL

    settings = Settings.from_env()
    log_requests = access_log_on(access_log)
    layout = worker_layout(worker, no_worker)
    if not is_loopback(host) and not auth_is_on(settings):
        if not insecure:
            typer.echo(
                f"refusing to serve {host} without authentication: create a key (agtos keys create --service NAME) "
                "or set AGTOS_AUTH=required; --insecure serves it open to anyone who can reach the port",
                err=True,
            )
            raise typer.Exit(2)
        warn_insecure(host)
    if not is_loopback(host) and "*" not in settings.allowed_hosts:
        served = ", ".join(sorted(settings.allowed_hosts))
        typer.echo(f"only these Host names are served: {served} (set AGTOS_ALLOWED_HOSTS)", err=True)
    with (
        cleanup_on_sigterm(),
        serve_ingest_env(ingest_mode, layout) as child,
        shared_embedded_redis(settings, workers, child),
        worker_child(child),
    ):
        uvicorn.run(
            "agtos.serving.main:app",
            host=host,
            port=port or settings.port,
            workers=workers,
            log_level="info",
            access_log=log_requests,
            http=PROTOCOL,  # an absolute-form target's authority is its Host (RFC 9112 3.2.2)
        )


def access_log_on(flag: bool | None) -> bool:
    """``--access-log/--no-access-log``, else ``AGTOS_ACCESS_LOG`` (off unless it is true, 1, yes or on).

    Off by default: uvicorn formats and writes each line on the event loop that every request goes
    through (measured: 1.11-1.24x the requests per second at 20 clients without it)."""
    import os

    if flag is not None:
        return flag
    raw = os.environ.get("AGTOS_ACCESS_LOG", "").strip()
    value = raw.lower() or "false"  # blank counts as unset, as for every setting
    if value not in ("true", "1", "yes", "on", "false", "0", "no", "off"):
        invalid_setting(f"AGTOS_ACCESS_LOG={raw!r} is not a boolean (true/false, 1/0, yes/no, on/off)")
    return value in ("true", "1", "yes", "on")


def warn_insecure(host: str) -> None:
    import logging

    line = "!" * 78
    logging.getLogger("agtos.serve").warning(
        "\n%s\n  INSECURE: serving %s with NO authentication. Anyone who can reach this port can read,\n"
        "  write and erase every user's memory. Create a key: agtos keys create --service NAME\n%s",
        line,
        host,
        line,
    )


register_memory_commands(memory_app)
register_worker_command(app)
app.command("reindex")(reindex_command)


@memory_app.command("export")
def export_memory(
    out: str = typer.Option(..., "--out", help="snapshot directory (replaced atomically; created if missing)"),
    user: list[str] = typer.Option(None, "--user", help="only this user; repeatable (default: every user)"),
) -> None:
    """Export stored memory to a Parquet snapshot: one file per record kind plus manifest.json."""
    from pathlib import Path

    from agtos.cli_memory import _progress, console, coordinator_from_env
    from agtos.memory.export import export_snapshot

    with coordinator_from_env() as coordinator, _progress() as progress:
        users = user or coordinator.known_users()
        bar = progress.add_task("exporting", total=len(users))
        advance = lambda _user: progress.advance(bar)  # noqa: E731
        try:
            counts = export_snapshot(coordinator.services, Path(out), users, on_user=advance)
        except (FileExistsError, ValueError) as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(1) from exc
    console.print(f"exported {len(users)} user(s) to {out}: " + ", ".join(f"{n} {k}" for k, n in counts.items()))


@app.command()
def mcp(
    http: bool = typer.Option(False, "--http", help="serve streamable HTTP (at /mcp) instead of stdio"),
    host: str = typer.Option("127.0.0.1", help="--http: interface to bind"),
    port: int = typer.Option(4103, min=1, max=65535, help="--http: port"),
    url: str = typer.Option(None, envvar="AGTOS_URL", help="the agtos API to use (default: run it in this process)"),
    api_key: str = typer.Option(None, envvar="AGTOS_API_KEY", help="bearer key for the API"),
    user: str = typer.Option(None, envvar="AGTOS_USER_ID", help="whose memory (default: AGTOS_DEFAULT_USER)"),
) -> None:
    """MCP server (tools remember, recall, get_context, ask_about_user, forget, list_memories; the
    profile as memory://profile) acting for one user, over stdio or streamable HTTP."""
    from agtos.mcp_server import run

    run(url, api_key, user, http, host, port)


flows_app = typer.Typer(help="Prefect flows: serve the deployments.", no_args_is_help=True)
app.add_typer(flows_app, name="flows")


@flows_app.command("serve")
def serve_flows() -> None:
    """Serve the ingestion, Dreamer and nightly-lint deployments (needs PREFECT_API_URL)."""
    from prefect.settings import get_current_settings

    if not get_current_settings().api.url:  # else Prefect serves them on a throwaway in-process server
        typer.echo(
            "agtos flows serve needs a Prefect server: start one (prefect server start) and set PREFECT_API_URL, "
            "e.g. http://127.0.0.1:4200/api",
            err=True,
        )
        raise typer.Exit(2)
    from agtos.flows.deployments import serve_deployments

    serve_deployments()


if __name__ == "__main__":
    app()
