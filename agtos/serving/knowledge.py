"""The Knowledge page: a static, offline front end over the entity API, served at ``/knowledge``."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static" / "knowledge"


def mount_knowledge(app: FastAPI, path: str = "/knowledge") -> None:
    """Serve ``static/knowledge`` (index.html at ``/knowledge/``; ``/knowledge`` redirects there)."""
    app.mount(path, StaticFiles(directory=STATIC_DIR, html=True), name="knowledge")
