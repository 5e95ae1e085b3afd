"""The HTTP API (FastAPI). Routers stay thin: logic lives in tasks/, memory/ and storage/."""
