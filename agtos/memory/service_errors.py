"""Errors a caller of the memory services can cause; the API answers them with a 4xx.

Kept apart from the pipelines so that importing an error loads nothing heavy (the lint's Polars
and DuckDB load with its first sweep).
"""


class MaintenanceDisabledError(RuntimeError):
    """AGTOS_MAINTENANCE_ENABLED=false: no lint path may run."""
