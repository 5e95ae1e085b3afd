"""The ``agtos`` command line: ``agtos serve``, ``agtos memory ...``."""

from __future__ import annotations

import typer

from agtos.cli_memory import register as register_memory_commands
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


register_memory_commands(memory_app)


if __name__ == "__main__":
    app()
