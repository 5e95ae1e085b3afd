"""Session-wide guards, loaded by tests/conftest.py (and usable alone as ``-p tests.session_guards``):

* under ``CI=true`` a skipped test fails the run (a missing browser, Prefect or Redis must not
  pass silently); only backends CI cannot provide may skip, with a reason starting with
  ``optional backend:``, and tests of a dataset that may not be redistributed (read from
  ``../shared/datasets`` where present), with one starting with ``optional dataset:``;
* Prefect's ephemeral server keeps its database under PREFECT_HOME: one throwaway home per run,
  removed at exit. The exit handler is registered before Prefect registers its own (the
  ephemeral server's stop), so it runs after them: the server is gone before its directory.
  Homes whose run died without exit handlers are removed by the next run.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
OPTIONAL_SKIP_PREFIX = "optional backend:"
OPTIONAL_DATASET_PREFIX = "optional dataset:"
ALLOWED_SKIP_PREFIXES = (OPTIONAL_SKIP_PREFIX, OPTIONAL_DATASET_PREFIX)

PREFECT_HOME_PREFIX = "agtos-prefect-"


def _remove_orphaned_homes() -> None:
    """Homes of runs that could not clean up (killed, or left by ``os._exit`` as forking runners
    such as mutmut do): the creator's pid is in the name, and a dead pid's home goes."""
    for path in Path(tempfile.gettempdir()).glob(f"{PREFECT_HOME_PREFIX}*-*"):
        pid = path.name.removeprefix(PREFECT_HOME_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


# An xdist worker inherits the controller's environment: a home this run made (marked by OWN_HOME) is the
# controller's, and each worker takes its own (two ephemeral Prefect servers on one SQLite file would contend).
OWN_HOME = "AGTOS_TEST_PREFECT_HOME"
_inherited = os.environ.get(OWN_HOME)
if "PREFECT_HOME" not in os.environ or (
    _inherited and _inherited == os.environ["PREFECT_HOME"] and os.environ.get("PYTEST_XDIST_WORKER")
):
    _remove_orphaned_homes()
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix=f"{PREFECT_HOME_PREFIX}{os.getpid()}-")
    os.environ[OWN_HOME] = os.environ["PREFECT_HOME"]
    atexit.register(shutil.rmtree, os.environ["PREFECT_HOME"], ignore_errors=True)


def _forbidden(reason: str) -> bool:
    return IN_CI and not reason.startswith(ALLOWED_SKIP_PREFIXES)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report = yield
    skip = call.excinfo.value if call.excinfo else None
    if report.skipped and isinstance(skip, pytest.skip.Exception) and not hasattr(report, "wasxfail"):
        reason = str(skip.msg or "")
        if _forbidden(reason):
            report.outcome = "failed"
            allowed = " or ".join(f"'{prefix} ...'" for prefix in ALLOWED_SKIP_PREFIXES)
            report.longrepr = f"skipped under CI=true (only {allowed} skips are allowed): {reason}"
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
