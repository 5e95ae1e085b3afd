"""``agtos memory …`` commands: import, ingest, maintain, search, forget (rich tables and progress bars)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from agtos.config import Settings

if TYPE_CHECKING:
    from agtos.memory.coordinator import MemoryCoordinator

console = Console(soft_wrap=True)  # a path or message is never broken by an inserted newline


@contextmanager
def coordinator_from_env() -> Iterator[MemoryCoordinator]:
    from agtos.memory.coordinator import MemoryCoordinator

    coordinator = MemoryCoordinator(Settings.from_env())
    try:
        yield coordinator
    finally:
        coordinator.close()


def _progress() -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    )


def register(memory_app: typer.Typer) -> None:
    """Attach the commands to the ``memory`` sub-app."""
    memory_app.command("ingest")(ingest_file)

    @memory_app.command("search")
    def search(
        query: str,
        user: str = typer.Option("default", help="user id"),
        limit: int = typer.Option(10, min=1, max=50),
        mode: str = typer.Option(None, help="hybrid, vector or bm25 (default: configured mode)"),
    ) -> None:
        """Search a user's episodes."""
        with coordinator_from_env() as coordinator:
            hits = coordinator.search_episodes(user, query, limit, mode)
        table = Table("score", "match", "topic", "summary", title=f"{len(hits)} result(s) for {query!r}")
        for hit in hits:
            table.add_row(f"{hit.score:.3f}", hit.match_type, hit.episode.topic, hit.episode.summary[:100])
        console.print(table)

    @memory_app.command("import")
    def import_(
        user: str = typer.Option("default", help="user id to import into"),
        source: list[str] = typer.Option(None, "--source", "-s", help="source(s) to import; repeatable"),
        all_sources: bool = typer.Option(False, "--all", help="import every source found without asking"),
    ) -> None:
        """Scan this machine for other AI tools' memories, choose, and import them (idempotent)."""
        from agtos.importers import resolve_home, scan_sources

        home = resolve_home(Settings.from_env().import_home)
        scanned = scan_sources(home)
        for warning in (w for s in scanned for w in s.warnings):  # paths left out, malformed lines, failures
            console.print(f"[yellow]warning: {escape(warning)}[/yellow]")
        found = [s for s in scanned if s.item_count > 0]
        if not found:
            console.print("No importable memories found.")
            raise typer.Exit(0)
        console.print(f"import home: {home} (AGTOS_IMPORT_HOME); secrets are redacted before storing")
        table = Table("source", "path", "items", title="Importable memories")
        for s in found:
            table.add_row(s.source, s.path, str(s.item_count))
        console.print(table)
        names = sorted({s.source for s in found})
        chosen = source or (names if all_sources else None)
        if chosen is None:
            answer = typer.prompt(f"Import which sources? ({', '.join(names)}, or 'all')", default="all")
            chosen = names if answer.strip() == "all" else [a.strip() for a in answer.split(",") if a.strip()]
        unknown = sorted(set(chosen) - set(names))
        if unknown:
            console.print(f"[red]not found here: {', '.join(unknown)}[/red]")
            raise typer.Exit(2)
        totals = {"episodesAdded": 0, "episodesUpdated": 0, "unchanged": 0, "memoriesAdded": 0}
        skipped: list[dict[str, str]] = []
        with coordinator_from_env() as coordinator, _progress() as progress:
            bar = progress.add_task("importing", total=len(chosen))
            for name in chosen:
                progress.update(bar, description=f"importing {name}")
                report = coordinator.import_sources(user, [name])
                for key in totals:
                    totals[key] += report[key]
                skipped += report["skipped"]
                progress.advance(bar)
        console.print(
            f"added {totals['episodesAdded']} episode(s), updated {totals['episodesUpdated']}, "
            f"added {totals['memoriesAdded']} memory item(s)"
            + (f", skipped {len(skipped)} session(s)" if skipped else "")
            + (f"; {totals['unchanged']} session(s) unchanged since the last import" if totals["unchanged"] else "")
        )
        for item in skipped:  # the save heuristics' reason (greetings, trivial lookups...)
            console.print(f"  skipped {escape(item['sessionId'])}: {escape(item['reason'])}")

    @memory_app.command("maintain")
    def maintain(
        user: str = typer.Option(None, help="one user (default: every user with stored memory)"),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="print every step of every report"),
    ) -> None:
        """Run the six-step memory lint now (waits while the ResourceGuard defers)."""
        from agtos.memory.privacy_controls import OptedOutError
        from agtos.memory.service_errors import MaintenanceDisabledError

        with coordinator_from_env() as coordinator:
            users = [user] if user else coordinator.known_users()
            reports = []
            with _progress() as progress:
                bar = progress.add_task("linting", total=len(users))
                for uid in users:
                    progress.update(bar, description=f"linting {uid}")
                    try:
                        reports.append(coordinator.maintain(uid))
                    except MaintenanceDisabledError as exc:
                        console.print(f"[yellow]{exc}[/yellow]")
                        raise typer.Exit(1) from exc
                    except OptedOutError as exc:  # their kept memory is not rewritten
                        console.print(f"[yellow]skipped {escape(uid)}: opted out of persistence[/yellow]")
                        if user:
                            raise typer.Exit(1) from exc
                    progress.advance(bar)
        summary = Table("user", "status", "before", "after", "merged", "contradictions", "pruned", "orphans")
        for r in reports:
            s = r.summary
            summary.add_row(
                r.user_id,
                s.get("status", "?"),
                str(s.get("conclusionsBefore", "-")),
                str(s.get("conclusionsAfter", "-")),
                str(s.get("merge", "-")),
                str(s.get("contradictions", "-")),
                str(s.get("prune", "-")),
                str(s.get("orphans", "-")),
            )
        console.print(summary)
        for r in reports:  # say why a lint that was asked for now did nothing
            if r.summary.get("status") == "deferred":
                reasons = ", ".join(dict.fromkeys(r.summary.get("reasons", [])))
                console.print(
                    f"[yellow]{escape(r.user_id)}: deferred by the ResourceGuard after {r.summary.get('attempts')} "
                    f"check(s) ({reasons}), nothing changed; AGTOS_BACKGROUND_WORK_POLICY=always runs it now[/yellow]"
                )
        if verbose:
            for r in reports:
                steps = Table("step", "count", "ms", "ids", title=f"{r.user_id} @ {r.timestamp}")
                for step in r.steps:
                    steps.add_row(step["step"], str(step["count"]), str(step["ms"]), ", ".join(step["ids"][:5]))
                console.print(steps)
                pipeline = r.summary.get("contradictionPipeline")
                if pipeline:
                    console.print(f"contradiction pipeline: {pipeline}")

    @memory_app.command("forget")
    def forget(
        user: str = typer.Option(..., help="whose memory"),
        kind: str = typer.Option("all", help="all, episode, memory, conclusion or entity"),
        item_id: str = typer.Option(None, "--id", help="the record id (not with --kind all)"),
        yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
    ) -> None:
        """Forget one record, or everything stored for a user."""
        if (kind == "all") != (item_id is None):
            console.print("[red]give --id for one record, and no --id with --kind all[/red]")
            raise typer.Exit(2)
        what = f"ALL memory of {user}" if kind == "all" else f"{kind} {item_id} of {user}"
        if not yes and not typer.confirm(f"Forget {what}?"):
            raise typer.Exit(1)
        from agtos.memory.privacy_controls import NotFoundError

        with coordinator_from_env() as coordinator:
            try:
                if kind == "all":
                    result = coordinator.privacy.forget_all(user)
                else:
                    result = coordinator.privacy.forget_item(user, kind, item_id)
            except (NotFoundError, ValueError) as exc:
                console.print(f"[red]{exc}[/red]")
                raise typer.Exit(1) from exc
        console.print_json(data=result)  # the HTTP answer's JSON, not a Python dict


def ingest_file(
    path: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSON Lines: one session per line"),
    user: str = typer.Option("default", help="user id to ingest into"),
    batch: int = typer.Option(16, min=1, max=100, help="sessions per ingestion batch (one embedding call each)"),
    url: str = typer.Option(None, help="send to a running API (e.g. http://127.0.0.1:4102) instead of in process"),
    api_key: str = typer.Option(None, envvar="AGTOS_API_KEY", help="bearer key for --url"),
) -> None:
    """Back-fill memory from a chat log: each line a session {"id", "started_at"?, "speakers"?, "turns"}.

    Idempotent: sessions already stored are reported unchanged."""
    from pydantic import ValidationError

    from agtos.memory.privacy_controls import OptedOutError
    from agtos.schemas.api import ConversationSession, ConversationsOut

    sessions: list[ConversationSession] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            sessions.append(ConversationSession.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            message = f"{path}:{number}: {first['msg']} at {first['loc']}"
            console.print(f"[red]{escape(message)}[/red]")
            raise typer.Exit(2) from exc
    repeated = sorted(sid for sid, n in Counter(s.id for s in sessions).items() if n > 1)
    if repeated:
        message = f"{path}: session ids repeat: {', '.join(repeated[:5])}"
        console.print(f"[red]{escape(message)}[/red]")
        raise typer.Exit(2)
    chunks = [sessions[i : i + batch] for i in range(0, len(sessions), batch)]
    results: list[ConversationsOut] = []
    with ExitStack() as stack:
        if url:
            from agtos.client import MemoryAPIError, MemoryClient

            client = stack.enter_context(MemoryClient(url, api_key=api_key, user_id=user))
            send = lambda chunk: client.ingest_conversations(chunk)  # noqa: E731
            refused: tuple[type[Exception], ...] = (MemoryAPIError,)
        else:
            coordinator = stack.enter_context(coordinator_from_env())
            send = lambda chunk: coordinator.ingest_conversations(user, chunk)  # noqa: E731
            refused = (OptedOutError,)
        progress = stack.enter_context(_progress())
        bar = progress.add_task("ingesting", total=len(sessions))
        for chunk in chunks:
            try:
                results.append(send(chunk))
            except refused as exc:
                console.print(f"[red]{exc}[/red]")
                raise typer.Exit(1) from exc
            progress.advance(bar, len(chunk))
    total = {key: sum(getattr(r, key) for r in results) for key in ("stored", "unchanged", "skipped", "memories")}
    console.print(
        f"{len(sessions)} session(s): stored {total['stored']}, unchanged {total['unchanged']}, "
        f"skipped {total['skipped']}; {total['memories']} memories"
    )
    degraded = {r.degraded for r in results if r.degraded}
    for note in degraded:
        console.print(f"[yellow]{note}[/yellow]")
