"""The suite's own guards (tests/session_guards.py): under ``CI=true`` a skip fails the run unless its
reason starts with "optional backend:" or "optional dataset:", and the throwaway PREFECT_HOME is removed at exit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = """
import pytest

@pytest.mark.skipif(True, reason="needs chromium")
def test_marked():
    pass

def test_inline():
    pytest.skip("no Prefect server")

def test_optional():
    pytest.skip("optional backend: RediSearch module not loaded")

@pytest.mark.skipif(True, reason="optional dataset: realtalk-dev not at ../shared/datasets")
def test_dataset():
    pass

def test_dataset_unprefixed():
    pytest.skip("dataset: realtalk-dev not at ../shared/datasets")

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False

def test_ok():
    pass
"""
MODULE_SKIP = 'import pytest\npytest.importorskip("agtos_no_such_module")\n\ndef test_never():\n    pass\n'


def _run(tmp_path: Path, ci: str | None, *files: str) -> tuple[int, str, list[Path]]:
    """pytest on the given case files with the session guards loaded as a plugin, in a private
    TMPDIR; returns the exit code, the report and what is left in that TMPDIR."""
    temp = tmp_path / f"tmp-{ci}"
    temp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_HOME", "CI")}
    env.update({"TMPDIR": str(temp), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"} | ({"CI": ci} if ci is not None else {}))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.session_guards", "-q", "-rA", *files],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return done.returncode, done.stdout + done.stderr, sorted(temp.iterdir())


def _outcomes(report: str) -> dict[str, str]:
    return dict((m[2], m[1]) for m in re.finditer(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL) \S+?::(\w+)", report, re.M))


def test_ci_turns_skips_into_failures_except_optional_backends(tmp_path: Path) -> None:
    cases = tmp_path / "test_cases.py"
    cases.write_text(CASES)
    code, report, left = _run(tmp_path, "true", str(cases))
    assert code == 1, report
    expected = {"test_ok": "PASSED", "test_xfail": "XFAIL", "test_marked": "ERROR", "test_inline": "FAILED"}
    assert _outcomes(report) == expected | {"test_dataset_unprefixed": "FAILED"}, report
    assert "optional backend: RediSearch module not loaded" in report
    assert "optional dataset: realtalk-dev not at ../shared/datasets" in report and report.count("SKIPPED [1]") == 2
    assert "skipped under CI=true" in report and "needs chromium" in report and "no Prefect server" in report
    assert left == []  # the PREFECT_HOME the conftest made under TMPDIR is gone

    code, report, left = _run(tmp_path, None, str(cases))  # outside CI a skip is a skip
    assert code == 0 and "1 passed, 5 skipped, 1 xfailed" in report, report
    assert left == []


def test_ci_fails_a_module_level_skip(tmp_path: Path) -> None:
    module = tmp_path / "test_module_skip.py"
    module.write_text(MODULE_SKIP)
    code, report, _ = _run(tmp_path, "true", str(module))
    assert code != 0 and "module skipped under CI=true" in report and "agtos_no_such_module" in report, report


def test_a_dead_runs_prefect_home_is_removed_by_the_next_run(tmp_path: Path) -> None:
    """Homes left by a run that died without exit handlers (killed, os._exit) go; live ones stay."""
    temp = tmp_path / "tmp-None"
    temp.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = temp / f"agtos-prefect-{int(dead.stdout)}-abc123"
    live = temp / f"agtos-prefect-{os.getpid()}-def456"
    unrelated = temp / "agtos-prefect-abc_123"  # no pid in the name: not ours to judge
    for path in (orphan, live, unrelated):
        (path / "sub").mkdir(parents=True)
    cases = tmp_path / "test_cases.py"
    cases.write_text("def test_ok():\n    pass\n")
    code, report, left = _run(tmp_path, None, str(cases))
    assert code == 0, report
    assert left == sorted([live, unrelated])
