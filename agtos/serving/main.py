"""ASGI entry point for uvicorn: ``uvicorn agtos.serving.main:app``."""

from agtos.serving.app import create_app

app = create_app()
