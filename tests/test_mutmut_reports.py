"""tests/mutmut_reports.py: in mutmut's statistics and clean passes a failing test is named on stderr
(mutmut keeps the child's stdout to itself); nowhere else does it add output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAILING = "def test_passes():\n    pass\n\n\ndef test_fails():\n    assert 1 == 2\n"


def run_pytest(tmp_path: Path, mutant_under_test: str | None) -> subprocess.CompletedProcess[str]:
    """A two-test file (one failing) run with the hook, as mutmut's child would with ``mutant_under_test``."""
    (tmp_path / "test_sample.py").write_text(FAILING, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "MUTANT_UNDER_TEST"}
    env["PYTHONPATH"] = str(ROOT)
    if mutant_under_test is not None:
        env["MUTANT_UNDER_TEST"] = mutant_under_test
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.mutmut_reports"]
    return subprocess.run(
        [*command, "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("run", ["", "stats"], ids=["clean", "stats"])
def test_a_failure_in_mutmuts_set_up_is_named_on_stderr(tmp_path: Path, run: str) -> None:
    done = run_pytest(tmp_path, run)
    assert done.returncode == 1, done.stdout
    assert "mutmut set-up: test_sample.py::test_fails failed (call)" in done.stderr
    assert "assert 1 == 2" in done.stderr and "test_passes" not in done.stderr


@pytest.mark.parametrize("run", [None, "fail", "agtos.config.x_env__mutmut_3"], ids=["plain", "forced", "mutant"])
def test_other_runs_get_nothing_on_stderr(tmp_path: Path, run: str | None) -> None:
    done = run_pytest(tmp_path, run)
    assert done.returncode == 1, done.stdout
    assert "mutmut set-up" not in done.stderr and "assert 1 == 2" not in done.stderr
    assert "test_sample.py::test_fails" in done.stdout  # pytest's own report, as always
