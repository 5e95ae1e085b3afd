"""A seeded random sample of the core's mutants, run by mutmut inside a time box (the CI check).

Lists every mutant mutmut would create for the core modules (``[tool.mutmut] only_mutate``),
drops the known equivalent ones, draws ``--size`` of them with ``--seed``, runs
``mutmut run <names>`` and stops it at ``--time-box`` seconds. The mutants that ran are then
scored together (``mutation_report.py --pooled``); exit 1 below ``--floor``, or when fewer than
``--min-run`` of them could run in the time box (mutmut runs the mutants with the fastest tests first).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_report import ROOT, core_modules, module_results, read_equivalents
from mutation_report import main as report


def all_mutant_names(modules: list[str], max_children: int) -> list[str]:
    """Every mutant name of the modules (sorted, so a seed is stable).

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
    return sorted(name for module in modules for name in module_results(module))


def run_time_boxed(cmd: list[str], time_box: float) -> None:
    """Run ``cmd``; past ``time_box`` seconds interrupt it (mutmut then stops its workers), kill it 30 s later."""
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
    try:
        proc.wait(timeout=time_box)
    except subprocess.TimeoutExpired:
        print(f"time box of {time_box:.0f} s reached: stopping mutmut", flush=True)
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--size", type=int, default=60)
    parser.add_argument("--time-box", type=float, default=240.0, help="seconds for the whole mutmut run")
    parser.add_argument("--floor", type=float, default=85.0)
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--min-run", type=int, default=20, help="fail when fewer sampled mutants could run")
    args = parser.parse_args()

    start = time.monotonic()
    modules = core_modules()
    equivalents = read_equivalents()
    candidates = [n for n in all_mutant_names(modules, args.max_children) if n not in equivalents]
    sample = sorted(random.Random(args.seed).sample(candidates, min(args.size, len(candidates))))
    print(f"sample of {len(sample)} mutants (seed {args.seed}) out of {len(candidates)} non-equivalent", flush=True)

    mutmut = str(Path(sys.executable).with_name("mutmut"))
    remaining = args.time_box - (time.monotonic() - start)
    run_time_boxed([mutmut, "run", "--max-children", str(args.max_children), *sample], remaining)

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write("\n".join(sample))
    results = {name: status for m in modules for name, status in module_results(m).items() if name in sample}
    ran = sum(1 for name in sample if results.get(name, "not checked") != "not checked")
    print(f"{ran}/{len(sample)} sampled mutants ran in {time.monotonic() - start:.0f} s", flush=True)
    status = report(["--only", f.name, "--pooled", "--survivors", "--floor", str(args.floor)])
    os.unlink(f.name)
    if ran < min(args.min_run, len(sample)):
        print(f"only {ran} sampled mutants ran inside the time box (at least {args.min_run} needed)", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
