"""Prefect 3 flows composing tasks into observable DAGs: ingestion, Dreamer, lint.

Without ``PREFECT_API_URL`` the flows run against Prefect's ephemeral local server; with
it they report to that server and show up in its UI. Telemetry is off by default.
"""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# the ephemeral server can take longer than Prefect's 20 s default to start on a small, busy machine
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
