"""A seeded random sample of the core's mutants, run by mutmut inside a time box (the CI check).

Lists every mutant mutmut would create for the core modules (``[tool.mutmut] only_mutate``),
drops the known equivalent ones, draws ``--size`` of them with ``--seed``, runs
``mutmut run <names>`` and stops its mutant phase after ``--time-box`` seconds (mutmut's own
set-up before it, mutant generation and its stats and clean passes over the selected tests, is
capped apart by ``--setup-limit`` and reported). The mutants that ran are then
scored together (``mutation_report.py --pooled``); exit 1 below ``--floor``, or when fewer than
``--min-run`` of them could run in the time box (mutmut runs the mutants with the fastest tests first).

``--per-module N`` draws N mutants of every core module instead (a stratified sample, seeded the same
way) and is meant to run without a time box (``--time-box 0``): every sampled mutant runs, so the
sample is not biased towards the mutants with the fastest tests, and each module's score gets a 95 %
Wilson lower bound (``mutation_report.py --bounds``), an estimate of the whole core at one commit in
a fraction of a complete ``make mutation``.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_report import ROOT, core_modules, module_results, read_equivalents
from mutation_report import main as report


def all_mutant_names(modules: list[str], max_children: int) -> dict[str, list[str]]:
    """Every mutant name of each module (sorted, so a seed is stable).

    Runs the generation step of ``mutmut run`` (the same functions, in the same ``mutants/``), so
    the ``mutmut run <names>`` that follows finds the files generated and does not redo them.
    """
    from mutmut.__main__ import create_mutants
    from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir

    os.chdir(ROOT)
    Path("mutants").mkdir(exist_ok=True)
    copy_src_dir()
    copy_also_copy_files()
    create_mutants(max_children)
    return {module: sorted(module_results(module)) for module in modules}


MUTANT_PHASE = "Running mutation testing"  # what mutmut prints when its set-up is done and mutants start
CLEAN_FAILED = "Failed to run clean test"  # mutmut's set-up ran the selected tests on the unmutated code: one failed


def draw(candidates: dict[str, list[str]], seed: int, size: int, per_module: int) -> list[str]:
    """``size`` mutants of all modules' ``candidates`` (sorted names), or ``per_module`` of each module's."""
    rng = random.Random(seed)
    if per_module:
        return sorted(n for names in candidates.values() for n in rng.sample(names, min(per_module, len(names))))
    pooled = sorted(n for names in candidates.values() for n in names)
    return sorted(rng.sample(pooled, min(size, len(pooled))))


def _stop(proc: subprocess.Popen[str]) -> None:
    """Interrupt mutmut (it stops its workers and saves results), kill it 30 s later."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_time_boxed(cmd: list[str], time_box: float, setup_limit: float) -> tuple[float, float, bool, bool]:
    """Run mutmut; its set-up (mutant generation, stats and clean passes over the selected tests)
    may take up to ``setup_limit`` s, then the mutant phase is stopped after ``time_box`` s.

    Returns (set-up seconds, mutant-phase seconds, whether the set-up finished in time, whether
    mutmut said its clean test run failed). The output is echoed line by line; a watchdog thread
    enforces both limits.
    """
    start = time.monotonic()
    phase_start: list[float] = []
    clean_failed = False
    proc = subprocess.Popen(
        cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    stopped = threading.Event()

    def watchdog() -> None:
        while proc.poll() is None and not stopped.is_set():
            now = time.monotonic()
            if phase_start and time_box and now - phase_start[0] > time_box:
                print(f"\ntime box of {time_box:.0f} s for the mutants reached: stopping mutmut", flush=True)
                _stop(proc)
                return
            if not phase_start and now - start > setup_limit:
                print(f"\nmutmut's set-up took over {setup_limit:.0f} s: stopping it", flush=True)
                _stop(proc)
                return
            time.sleep(0.5)

    guard = threading.Thread(target=watchdog, daemon=True)
    guard.start()
    assert proc.stdout is not None
    for line in proc.stdout:  # universal newlines: the spinner's carriage returns end lines too
        if not line.strip() or "\u2800" <= line.lstrip()[0] <= "\u28ff":
            continue  # spinner frames
        sys.stdout.write(line)
        clean_failed = clean_failed or CLEAN_FAILED in line
        if not phase_start and MUTANT_PHASE in line:
            phase_start.append(time.monotonic())
            print(f"set-up done in {phase_start[0] - start:.0f} s; mutants get {time_box:.0f} s", flush=True)
    proc.wait()
    stopped.set()
    end = time.monotonic()
    if not phase_start:
        return end - start, 0.0, False, clean_failed
    return phase_start[0] - start, end - phase_start[0], True, clean_failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--size", type=int, default=60)
    parser.add_argument("--per-module", type=int, default=0, help="draw this many of each module (stratified)")
    parser.add_argument("--time-box", type=float, default=300.0, help="seconds for the mutant phase (0: no limit)")
    parser.add_argument(
        "--setup-limit", type=float, default=1500.0, help="seconds for mutmut's set-up (generation, stats, clean run)"
    )
    parser.add_argument("--floor", type=float, default=85.0)
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--min-run", type=int, default=20, help="fail when fewer sampled mutants could run")
    args = parser.parse_args()

    start = time.monotonic()
    modules = core_modules()
    equivalents = read_equivalents()
    names = all_mutant_names(modules, args.max_children)
    candidates = {m: [n for n in found if n not in equivalents] for m, found in names.items()}
    sample = draw(candidates, args.seed, args.size, args.per_module)
    total = sum(len(found) for found in candidates.values())
    how = f"{args.per_module} per module" if args.per_module else "pooled"
    print(f"sample of {len(sample)} mutants ({how}, seed {args.seed}) out of {total} non-equivalent", flush=True)

    mutmut = str(Path(sys.executable).with_name("mutmut"))
    listing = time.monotonic() - start
    command = [mutmut, "run", "--max-children", str(args.max_children), *sample]
    setup, phase, started, clean_failed = run_time_boxed(command, args.time_box, args.setup_limit)
    if not started and clean_failed:
        # a test failing on the unmutated code fails `make test` too, so this is a flake (the test is
        # named above on stderr by tests/mutmut_reports.py): once more, said aloud; a second failure
        # fails the check
        print("mutmut's clean test run failed: running it once more", flush=True)
        setup, phase, started, clean_failed = run_time_boxed(command, args.time_box, args.setup_limit)
    print(f"listing {listing:.0f} s, mutmut set-up {setup:.0f} s, mutant phase {phase:.0f} s", flush=True)
    if not started:
        print("mutmut never reached its mutant phase (see its output above)", file=sys.stderr)
        return 1

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write("\n".join(sample))
    results = {name: status for m in modules for name, status in module_results(m).items() if name in sample}
    ran = sum(1 for name in sample if results.get(name, "not checked") != "not checked")
    print(f"{ran}/{len(sample)} sampled mutants ran in {time.monotonic() - start:.0f} s", flush=True)
    scoring = ["--bounds"] if args.per_module else ["--pooled"]
    status = report(["--only", f.name, *scoring, "--survivors", "--floor", str(args.floor)])
    os.unlink(f.name)
    if ran < min(args.min_run, len(sample)):
        print(f"only {ran} sampled mutants ran inside the time box (at least {args.min_run} needed)", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
