"""Run named mutants directly: one pytest per mutant, forked from a process that imported the tests once.

``mutmut run`` spends minutes on its set-up (a statistics pass over the whole test selection) and runs
each mutant against the selected tests that reach its function. This script runs the mutants you name
against the tests you name, and records each result where mutmut does, so that
``tools/mutation_report.py`` counts it like any other::

    cd <a clone>   # never while a `mutmut run` works in the same tree
    AGTOS_TEST_REDIS_URL=redis://127.0.0.1:6379/<db> nice -n 10 .venv/bin/python tools/mutation_direct.py \\
        'agtos.tasks.ranking.x_reciprocal_rank_fusion__mutmut_*' \\
        --tests tests/test_core_ranking.py tests/test_rrf_bm25.py

Names are mutmut's (``mutmut show <name>``); glob patterns (``*``, ``?``) match them. They are listed by
mutmut's own generation step (``mutation_sample.all_mutant_names``: ``mutants/`` is created or brought
up to date, the test files copied in again), over the modules of ``[tool.mutmut] only_mutate``.

How it runs, like mutmut's forkserver: the working directory is ``mutants/`` and ``mutants/`` is first on
``sys.path`` (the editable install cannot shadow it); the parent imports pytest, the conftest and the test
modules once (``pytest --collect-only``, no test run), then forks one child per mutant, which sets
``MUTANT_UNDER_TEST`` and runs ``pytest <tests> -x -q -p no:cacheprovider`` (stopping at the first failure)
in a process group of its own. Before any mutant, ``MUTANT_UNDER_TEST=none`` (the unmutated code) must pass
and the mutated modules must have been imported from ``mutants/``, else nothing is run (exit 2; so too when
that clean run takes longer than ``--timeout``). A pattern that matches no mutant is an error (exit 1).

Results go into ``mutants/<module>.meta`` (``exit_code_by_key``), with mutmut's codes
(``mutmut.stats.status_by_exit_code``): 1 killed (a test failed; also an error while collecting the tests,
which the clean run did not have), 0 survived, 36 timeout (the child ran past ``--timeout`` and was killed).
Mutants with a result already recorded (by mutmut or an earlier run) are skipped unless ``--rerun``.

``--fresh``: for mutants of code that runs at import (a module-level ``re.compile(...)`` through a mutated
function, which the parent would already have run unmutated): the parent imports neither the project nor
the tests, so each child, forked with the mutant set, imports them anew.

``--timeout`` defaults to 5 x the clean run's duration + 30 s. Each line printed names the mutant, its
status, the first failing test, the seconds it took and the running totals.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_report import ROOT, core_modules
from mutation_sample import all_mutant_names
from mutmut.stats import status_by_exit_code

MUTANTS = ROOT / "mutants"
CLEAN = "none"  # no mutant of that name: every trampoline calls the original
KILLED, SURVIVED, TIMEOUT = 1, 0, 36  # mutmut's exit codes (status_by_exit_code)
PYTEST_INTERRUPTED = 2  # pytest's code for errors while collecting (the clean run had none)


@dataclass
class Outcome:
    code: int  # the exit code recorded (mutmut's meaning)
    seconds: float
    first_failure: str  # node id of the first failing test or collector ("" when none failed)
    module_files: dict[str, str]  # dotted module -> the file it was imported from, in the child


@contextmanager
def quiet_fds() -> Iterator[None]:
    """Send file descriptors 1 and 2 to /dev/null (mutmut's generation prints every file it walks)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def dotted(module: str) -> str:
    return module.removesuffix(".py").replace("/", ".")


def select(patterns: list[str], names: list[str]) -> list[str]:
    """The names matching any pattern (exact names or globs), in the order of ``names``; exits 2 when a
    pattern matches none (a typo would otherwise run nothing silently)."""
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if unmatched:
        raise SystemExit(f"no mutant matches {', '.join(unmatched)} (names as in `mutmut show`)")
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def read_meta(module: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MUTANTS / f"{module}.meta").read_text(encoding="utf-8"))
    return data


def record(module: str, name: str, outcome: Outcome) -> None:
    """Write one result into mutmut's ``mutants/<module>.meta`` (read again each time: results are kept
    even when the run is stopped)."""
    meta = read_meta(module)
    meta["exit_code_by_key"][name] = outcome.code
    meta["durations_by_key"][name] = round(outcome.seconds, 3)
    (MUTANTS / f"{module}.meta").write_text(json.dumps(meta, indent=4), encoding="utf-8")


class FirstFailure:
    """pytest plugin: the node id of the first failing test or collector."""

    def __init__(self) -> None:
        self.nodeid = ""

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed and not self.nodeid:
            self.nodeid = report.nodeid

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed and not self.nodeid:
            self.nodeid = f"{report.nodeid or 'collection'} (collecting)"


def pytest_args(tests: list[str], extra: list[str]) -> list[str]:
    return ["--rootdir=.", *tests, "-x", "-q", "-p", "no:cacheprovider", *extra]


def child(mutant: str, tests: list[str], modules: list[str], verbose: bool, write_fd: int) -> None:
    """In the forked child: run the tests with ``mutant`` on, report, and never return."""
    code = 3
    try:
        os.setpgid(0, 0)  # its own group: a timeout kills whatever the tests started too
        from mutmut.mutation.trampoline import set_mutant_under_test

        set_mutant_under_test(mutant)  # sets MUTANT_UNDER_TEST, and keeps it if a test clears os.environ
        if not verbose:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
        import pytest

        plugin = FirstFailure()
        code = int(pytest.main(pytest_args(tests, []), plugins=[plugin]))
        files = {m: str(getattr(sys.modules.get(m), "__file__", "") or "") for m in modules}
        os.write(write_fd, json.dumps({"first_failure": plugin.nodeid, "files": files}).encode())
    finally:
        os._exit(code)


def run_one(mutant: str, tests: list[str], modules: list[str], timeout: float, verbose: bool) -> Outcome:
    read_fd, write_fd = os.pipe()
    start = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        child(mutant, tests, modules, verbose, write_fd)
    os.close(write_fd)
    timed_out = False
    status = 0
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() - start > timeout:
                timed_out = True
                os.killpg(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.05)
    except BaseException:  # stopped (^C): take the child's group down with us
        try:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        raise
    seconds = time.monotonic() - start
    with os.fdopen(read_fd, "rb") as pipe:
        report = json.loads(pipe.read() or b'{"first_failure": "", "files": {}}')
    code = TIMEOUT if timed_out else os.waitstatus_to_exitcode(status)
    return Outcome(code, seconds, report["first_failure"], report["files"])


def prepare_parent(tests: list[str], fresh: bool) -> None:
    """Become mutmut's test process: cwd ``mutants/``, ``mutants/`` first on ``sys.path``, the project's own
    tree off it; unless ``fresh``, import pytest, the conftest and the test modules (collect, run nothing)."""
    if any(m == "agtos" or m.startswith("agtos.") for m in sys.modules):
        raise SystemExit("the project was imported before mutants/ was on sys.path")
    os.chdir(MUTANTS)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
    sys.path.insert(0, str(MUTANTS))
    os.environ["MUTANT_UNDER_TEST"] = CLEAN
    if fresh:
        return
    import pytest

    with quiet_fds():
        code = int(pytest.main(pytest_args(tests, ["--collect-only", "-qqq"])))
    if code != 0:
        raise SystemExit(f"collecting {' '.join(tests)} in mutants/ failed (pytest exit code {code})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mutants", nargs="+", help="mutant names or glob patterns (as `mutmut show` names them)")
    parser.add_argument("--tests", nargs="+", required=True, help="pytest targets (files, file::test)")
    parser.add_argument("--rerun", action="store_true", help="also run mutants that already have a result")
    parser.add_argument("--fresh", action="store_true", help="import the project and tests anew in each child")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default: 5 x the clean run + 30)")
    parser.add_argument("--max-children", type=int, default=1, help="processes for mutmut's generation step")
    parser.add_argument("-v", "--verbose", action="store_true", help="show pytest's output of every child")
    args = parser.parse_args(argv)

    modules = core_modules()
    with quiet_fds():
        names_by_module = all_mutant_names(modules, args.max_children)
    module_of = {name: module for module, names in names_by_module.items() for name in names}
    chosen = select(args.mutants, sorted(module_of))
    recorded = {m: read_meta(m)["exit_code_by_key"] for m in {module_of[n] for n in chosen}}
    todo = [n for n in chosen if args.rerun or recorded[module_of[n]][n] is None]
    print(f"{len(chosen)} mutants match, {len(chosen) - len(todo)} already have a result, {len(todo)} to run")
    if not todo:
        return 0

    wanted = sorted({dotted(module_of[n]) for n in todo})
    prepare_parent(args.tests, args.fresh)
    clean = run_one(CLEAN, args.tests, wanted, timeout=3600.0, verbose=args.verbose)
    if clean.code != 0:
        what = status_by_exit_code[clean.code] if clean.code == TIMEOUT else f"exit code {clean.code}"
        print(f"the unmutated code fails the tests ({what}) {clean.first_failure}: nothing run", file=sys.stderr)
        return 2
    outside = {m: f for m, f in clean.module_files.items() if not f.startswith(str(MUTANTS) + os.sep)}
    if outside:
        print(f"not imported from mutants/ (wrong code, or no test imports it): {outside}", file=sys.stderr)
        return 2
    timeout = args.timeout or 5 * clean.seconds + 30
    if clean.seconds > timeout:
        print(f"the clean run took {clean.seconds:.0f} s, over --timeout: survivors would be timeouts", file=sys.stderr)
        return 2
    print(f"clean run passed in {clean.seconds:.1f} s; timeout {timeout:.0f} s a mutant", flush=True)

    totals: Counter[str] = Counter()
    start = time.monotonic()
    for i, name in enumerate(todo, 1):
        outcome = run_one(name, args.tests, wanted, timeout, args.verbose)
        if outcome.code == PYTEST_INTERRUPTED and outcome.first_failure.endswith("(collecting)"):
            outcome.code = KILLED  # a test module no longer imports with the mutant on
        record(module_of[name], name, outcome)
        status = status_by_exit_code[outcome.code]
        totals[status] += 1
        left = (time.monotonic() - start) / i * (len(todo) - i)
        tally = ", ".join(f"{s} {n}" for s, n in sorted(totals.items()))
        why = f" by {outcome.first_failure}" if outcome.first_failure else ""
        print(
            f"[{i}/{len(todo)}] {name}: {status}{why} ({outcome.seconds:.1f} s) | {tally} | ~{left / 60:.0f} min left",
            flush=True,
        )
    survivors = [n for n in todo if status_by_exit_code[recorded_code(module_of[n], n)] == "survived"]
    for name in survivors:
        print(f"survived: {name}")
    return 0


def recorded_code(module: str, name: str) -> int | None:
    code: int | None = read_meta(module)["exit_code_by_key"][name]
    return code


if __name__ == "__main__":
    sys.exit(main())
