"""Prefect 3 flows composing tasks into observable DAGs: ingestion, Dreamer, lint.

Without ``PREFECT_API_URL`` the flows run against Prefect's ephemeral local server; with
it they report to that server and show up in its UI. Telemetry is off by default.
"""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
