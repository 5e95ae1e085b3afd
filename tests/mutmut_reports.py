"""Names the failing test of mutmut's set-up runs (loaded by tests/conftest.py; alone as
``-p tests.mutmut_reports``).

mutmut 3 runs its statistics and clean passes over the selected tests in a forked child whose
``sys.stdout`` is the parent's output catcher: the child's copy of it is dropped when the child
exits, so "Failed to run clean test" came with no test output unless ``debug = true``. In those
two runs (``MUTANT_UNDER_TEST`` set to ``stats`` or empty) a failed test's id and report are also
written to the process's real stderr. Mutant runs (a mutant's name) and the forced-fail run
(``fail``), where failures are the point, and every run outside mutmut write nothing more.
"""

from __future__ import annotations

import os
import sys

import pytest

SET_UP_RUNS = ("", "stats")  # mutmut's MUTANT_UNDER_TEST for its clean and statistics passes


def in_mutmut_set_up() -> bool:
    """Whether this process runs mutmut's statistics or clean pass."""
    return os.environ.get("MUTANT_UNDER_TEST") in SET_UP_RUNS


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed and in_mutmut_set_up() and sys.__stderr__ is not None:
        sys.__stderr__.write(f"\nmutmut set-up: {report.nodeid} failed ({report.when})\n{report.longreprtext}\n")
        sys.__stderr__.flush()
