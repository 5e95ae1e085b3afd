"""``agtos reindex``: vectors of the current embedder for the records (and entity names) another
embedder's vectors were made for (:mod:`agtos.memory.reindex`)."""

from __future__ import annotations

import typer

from agtos.cli_memory import _progress, console, coordinator_from_env
from agtos.tasks.url_credentials import mask_urls


def reindex_command(
    user: list[str] = typer.Option(None, "--user", help="only this user; repeatable (default: every user)"),
    check: bool = typer.Option(False, "--check", help="only say who waits (exit 1 when anyone does)"),
) -> None:
    """Re-embed stored texts with the configured embedder where another one made the vectors
    (idempotent; run again to resume)."""
    from agtos.memory.reindex import current_space, describe_indexes, describe_stale, reindex, stale_indexes

    with coordinator_from_env() as coordinator:
        rt = coordinator.services
        if not rt.semantic.embedder_available():
            console.print(f"[red]embedder unavailable: {mask_urls(str(rt.semantic.embedder_error))}[/red]")
            raise typer.Exit(1)
        stale = stale_indexes(rt, user or None)
        users = len({index.user_id for index in stale})
        if check or not stale:
            console.print(
                describe_stale(stale, current_space(rt)) or "every vector was made by the configured embedder"
            )
            if stale:  # which families wait: records, their turns, entity names
                console.print(describe_indexes(stale))
            raise typer.Exit(1 if stale else 0)
        with _progress() as progress:
            bar = progress.add_task("reindexing", total=users)

            def on_user(user_id: str) -> None:  # the bar counts the users begun
                progress.update(bar, description=f"reindexing {user_id}", advance=1)

            report = reindex(rt, stale, on_user)
            progress.update(bar, completed=report.users)
    console.print(
        f"reindexed {report.users} of {users} user(s): {report.embedded} record(s) embedded, "
        f"{report.skipped} gone meanwhile, {report.switched} index(es) of another embedder cleared"
    )
    if report.error:
        console.print(f"[red]stopped: {report.error}; run `agtos reindex` again to go on[/red]")
        raise typer.Exit(1)
