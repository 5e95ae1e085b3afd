"""The ``agtos`` command line: ``agtos serve``, ``agtos memory ...``."""

from __future__ import annotations

import typer

from agtos.config import Settings

app = typer.Typer(help="agtos: memory for AI agents.", no_args_is_help=True)
memory_app = typer.Typer(help="Inspect and manage stored memory.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="interface to bind"),
    port: int = typer.Option(None, help="port (default AGTOS_PORT or 4102)"),
    workers: int = typer.Option(1, min=1, help="uvicorn worker processes"),
) -> None:
    """Run the memory API (embedded Redis unless REDIS_URL is set)."""
    import uvicorn

    settings = Settings.from_env()
    uvicorn.run(
        "agtos.serving.main:app",
        host=host,
        port=port or settings.port,
        workers=workers,
        log_level="info",
    )


@memory_app.command("search")
def search(query: str, user: str = typer.Option("default", help="user id"), limit: int = 10) -> None:
    """Search a user's episodes from the terminal."""
    from rich.console import Console
    from rich.table import Table

    from agtos.memory.coordinator import MemoryCoordinator

    coordinator = MemoryCoordinator(Settings.from_env())
    try:
        hits = coordinator.search_episodes(user, query, limit)
    finally:
        coordinator.close()
    table = Table("score", "match", "topic", "summary")
    for hit in hits:
        table.add_row(f"{hit.score:.3f}", hit.match_type, hit.episode.topic, hit.episode.summary[:100])
    Console().print(table)


if __name__ == "__main__":
    app()
