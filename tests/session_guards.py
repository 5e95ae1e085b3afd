"""Session-wide guards, loaded by tests/conftest.py (and usable alone as ``-p tests.session_guards``):

* under ``CI=true`` a skipped test fails the run (a missing browser, Prefect or Redis must not
  pass silently); only backends CI cannot provide may skip, with a reason starting with
  ``optional backend:``;
* Prefect's ephemeral server keeps its database under PREFECT_HOME: one throwaway home per run,
  removed at exit. The exit handler is registered before Prefect registers its own (the
  ephemeral server's stop), so it runs after them: the server is gone before its directory.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
OPTIONAL_SKIP_PREFIX = "optional backend:"

if "PREFECT_HOME" not in os.environ:
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="agtos-prefect-")
    atexit.register(shutil.rmtree, os.environ["PREFECT_HOME"], ignore_errors=True)


def _forbidden(reason: str) -> bool:
    return IN_CI and not reason.startswith(OPTIONAL_SKIP_PREFIX)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report = yield
    skip = call.excinfo.value if call.excinfo else None
    if report.skipped and isinstance(skip, pytest.skip.Exception) and not hasattr(report, "wasxfail"):
        reason = str(skip.msg or "")
        if _forbidden(reason):
            report.outcome = "failed"
            report.longrepr = f"skipped under CI=true (only '{OPTIONAL_SKIP_PREFIX} ...' skips are allowed): {reason}"
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[pytest.CollectReport]:
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        if _forbidden(reason):
            report.outcome = "failed"
            report.longrepr = f"module skipped under CI=true: {reason}"
    return report
