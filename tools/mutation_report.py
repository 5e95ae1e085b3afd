"""Mutation score per core module from mutmut's results (``mutants/**/*.meta``).

Prints killed / timeout / survived / no-tests / score for every module listed in
``[tool.mutmut] only_mutate`` and exits 1 when a module scores below ``--floor``.
Mutants listed in ``docs/equivalent_mutants.txt`` (see docs/testing.md) are left out
of the denominator. Timeouts count as killed (the mutant was detected).
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mutmut.stats import status_by_exit_code

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = ROOT / "docs" / "equivalent_mutants.txt"
DETECTED = {"killed", "timeout", "caught by type check", "segfault"}  # segfault: SIGKILL after the CPU limit


def core_modules(root: Path = ROOT) -> list[str]:
    """The source files ``make mutation`` mutates (``[tool.mutmut] only_mutate``)."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return list(config["tool"]["mutmut"]["only_mutate"])


def read_equivalents(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """``{mutant name: reason}``; one ``name  # reason`` per line, ``#`` lines are comments."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, reason = line.partition("#")
        if name.strip():
            if not reason.strip():
                raise SystemExit(f"{path}: {name.strip()} has no reason (write `name  # why it is equivalent`)")
            out[name.strip()] = reason.strip()
    return out


def module_results(module: str, root: Path = ROOT) -> dict[str, str]:
    """``{mutant name: status}`` of one module (empty when mutmut never ran on it)."""
    meta = root / "mutants" / f"{module}.meta"
    if not meta.is_file():
        return {}
    data = json.loads(meta.read_text(encoding="utf-8"))
    return {name: status_by_exit_code[code] for name, code in data["exit_code_by_key"].items()}


@dataclass
class ModuleScore:
    module: str
    counts: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)
    equivalent: int = 0

    @property
    def detected(self) -> int:
        return sum(self.counts[s] for s in DETECTED)

    @property
    def counted(self) -> int:
        return sum(n for s, n in self.counts.items() if s != "not checked")

    @property
    def score(self) -> float | None:
        return 100.0 * self.detected / self.counted if self.counted else None


def score_modules(
    modules: list[str], equivalents: dict[str, str], only: set[str] | None = None, root: Path = ROOT
) -> list[ModuleScore]:
    scores = []
    for module in modules:
        ms = ModuleScore(module)
        for name, status in sorted(module_results(module, root).items()):
            if only is not None and name not in only:
                continue
            if name in equivalents:
                ms.equivalent += 1
                continue
            ms.counts[status] += 1
            if status not in DETECTED and status != "not checked":
                ms.survivors.append(f"{name} ({status})")
        scores.append(ms)
    return scores


def print_table(scores: list[ModuleScore], floor: float) -> None:
    header = f"{'module':34} {'killed':>6} {'timeout':>7} {'survived':>8} {'no tests':>8} {'equiv':>5} {'unrun':>5}"
    header += " score"
    print(header)
    print("-" * len(header))
    for ms in scores:
        c = ms.counts
        other = ms.counted - ms.detected - c["survived"] - c["no tests"]
        score = "   n/a" if ms.score is None else f"{ms.score:5.1f}%"
        flag = "" if ms.score is None or ms.score >= floor else f"  < {floor:g}%"
        survived = c["survived"] + other
        print(
            f"{ms.module:34} {c['killed']:>6} {c['timeout']:>7} {survived:>8} {c['no tests']:>8}"
            f" {ms.equivalent:>5} {c['not checked']:>5} {score}{flag}"
        )
    total_detected = sum(ms.detected for ms in scores)
    total = sum(ms.counted for ms in scores)
    if total:
        print(f"{'all core modules':34} {total_detected}/{total} detected: {100.0 * total_detected / total:.1f}%")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--floor", type=float, default=85.0, help="minimum %% of non-equivalent mutants killed")
    parser.add_argument("--survivors", action="store_true", help="list the surviving mutants of each module")
    parser.add_argument("--only", type=Path, help="score only the mutant names listed in this file (a sample)")
    parser.add_argument("--pooled", action="store_true", help="apply the floor to all modules together (samples)")
    args = parser.parse_args(argv)

    equivalents = read_equivalents()
    only = set(args.only.read_text(encoding="utf-8").split()) if args.only else None
    modules = core_modules()
    scores = score_modules(modules, equivalents, only)
    print_table(scores, args.floor)

    known = {name for m in modules for name in module_results(m)}
    stale = sorted(set(equivalents) - known) if known else []
    for name in stale:
        print(f"warning: equivalent mutant {name} no longer exists; remove it from {EQUIVALENT_FILE.name}")
    if args.survivors:
        for ms in scores:
            for name in ms.survivors:
                print(f"survived: {name}")

    if not any(ms.counted for ms in scores):
        print("no mutation results: run `make mutation` first", file=sys.stderr)
        return 1
    unrun = [ms.module for ms in scores if ms.counts["not checked"]]
    if unrun and only is None:
        print(f"mutants not run yet in {', '.join(unrun)}: run `make mutation`", file=sys.stderr)
        return 1
    if args.pooled:
        detected, total = sum(ms.detected for ms in scores), sum(ms.counted for ms in scores)
        failing = [] if 100.0 * detected / total >= args.floor else ["all core modules"]
    else:
        failing = [ms.module for ms in scores if ms.score is not None and ms.score < args.floor]
    if failing:
        print(f"below the {args.floor:g}% floor: {', '.join(failing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
