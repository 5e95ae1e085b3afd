"""Mutation score per core module from mutmut's results (``mutants/**/*.meta``).

Prints killed / timeout / survived / no-tests / score for every module listed in
``[tool.mutmut] only_mutate`` and exits 1 when a module scores below ``--floor``.
Mutants listed in ``docs/equivalent_mutants.txt`` (see docs/testing.md) are left out
of the denominator. Timeouts count as killed (the mutant was detected).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import json
import re
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


@dataclass(frozen=True)
class Equivalent:
    name: str
    reason: str
    pin: str | None  # fingerprint of the change the entry was checked against (``[1a2b3c4d]``)


_ENTRY = re.compile(r"^(?P<name>\S+)(?:\s+\[(?P<pin>[0-9a-f]{8})\])?$")


def read_equivalent_entries(path: Path = EQUIVALENT_FILE) -> list[Equivalent]:
    """One ``name [pin]  # why`` per line (the pin optional), ``#`` lines are comments."""
    out: list[Equivalent] = []
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        head, _, reason = line.partition("#")
        if not head.strip():
            continue
        found = _ENTRY.match(head.strip())
        if found is None:
            raise SystemExit(f"{path}: cannot read {head.strip()!r} (write `name [pin]  # why it is equivalent`)")
        if not reason.strip():
            raise SystemExit(f"{path}: {found['name']} has no reason (write `name  # why it is equivalent`)")
        out.append(Equivalent(found["name"], reason.strip(), found["pin"]))
    return out


def read_equivalents(path: Path = EQUIVALENT_FILE, root: Path = ROOT) -> dict[str, str]:
    """``{mutant name: reason}`` of the listed equivalent mutants that still are what was checked:
    an entry whose pin no longer matches its mutant's change (the mutant numbers shifted when the
    function changed, so the name now names another mutant) is left out, and so counted."""
    return {e.name: e.reason for e in read_equivalent_entries(path) if pin_state(e, root) != "moved"}


def _module_of(name: str, root: Path = ROOT) -> tuple[str, str] | None:
    """``(module path, mangled function name)`` of a mutant name (``agtos.x.y.xǁCǁf__mutmut_3``)."""
    for module in core_modules(root):
        dotted = module.removesuffix(".py").replace("/", ".") + "."
        if name.startswith(dotted):
            return module, name[len(dotted) :]
    return None


_functions_cache: dict[Path, dict[str, list[str]]] = {}


def _functions(path: Path) -> dict[str, list[str]]:
    if path not in _functions_cache:
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        _functions_cache[path] = {
            node.name: lines[node.lineno - 1 : node.end_lineno]
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
    return _functions_cache[path]


def mutant_change(name: str, root: Path = ROOT) -> list[str] | None:
    """The lines a mutant removes (``-``) and adds (``+``), read from mutmut's copy of the module
    (``mutants/<module>``, which holds the original and every mutant of each function); None when
    mutmut has not generated it (no run yet, or the name no longer exists)."""
    where = _module_of(name, root)
    if where is None or not (root / "mutants" / where[0]).is_file():
        return None
    module, function = where
    functions = _functions(root / "mutants" / module)
    original = function.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"
    if function not in functions or original not in functions:
        return None
    a = [line.replace(original, "F") for line in functions[original]]
    b = [line.replace(function, "F") for line in functions[function]]
    diff = difflib.unified_diff(a, b, lineterm="", n=0)
    return [d[0] + d[1:].strip() for d in diff if d[:1] in "+-" and not d.startswith(("---", "+++"))]


def pin_of(change: list[str]) -> str:
    return hashlib.sha256("\n".join(change).encode()).hexdigest()[:8]


def pin_state(entry: Equivalent, root: Path = ROOT) -> str:
    """``ok``, ``unpinned``, ``moved`` (the pin names another change now) or ``unknown`` (not generated)."""
    change = mutant_change(entry.name, root)
    if change is None:
        return "unknown"
    if entry.pin is None:
        return "unpinned"
    return "ok" if pin_of(change) == entry.pin else "moved"


def pin_equivalents(path: Path = EQUIVALENT_FILE, root: Path = ROOT) -> int:
    """Write the current pin of every unpinned entry (after checking by eye that each still is the
    mutant its reason describes: ``--equivalents`` shows them). Returns how many were pinned."""
    pinned = 0
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        head, _, reason = line.partition("#")
        found = _ENTRY.match(head.strip()) if head.strip() else None
        change = mutant_change(found["name"], root) if found and not found["pin"] else None
        if found and change is not None:
            line = f"{found['name']} [{pin_of(change)}]  #{reason}"
            pinned += 1
        out.append(line)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return pinned


def stale_entries(entries: list[Equivalent], modules: list[str], known: set[str]) -> list[str]:
    """Listed equivalents of the ``modules`` mutated whose mutant mutmut no longer makes (``known``:
    the names it made; none known: nothing judged). Entries of other files (a run over them listed
    them) are not this run's to judge."""
    if not known:
        return []
    prefixes = tuple(m.removesuffix(".py").replace("/", ".") + "." for m in modules)
    return sorted({e.name for e in entries if e.name.startswith(prefixes)} - known)


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


def lower_bound(detected: int, counted: int) -> float:
    """95 % Wilson lower bound (percent) of a module's kill rate from a random sample of its mutants."""
    from scipy.stats import binomtest  # the dev extra

    return 100.0 * float(binomtest(detected, counted).proportion_ci(0.95, method="wilson").low)


def print_table(scores: list[ModuleScore], floor: float, bounds: bool = False) -> None:
    header = f"{'module':34} {'killed':>6} {'timeout':>7} {'survived':>8} {'no tests':>8} {'equiv':>5} {'unrun':>5}"
    header += " score" + ("  95% lower" if bounds else "")
    print(header)
    print("-" * len(header))
    for ms in scores:
        c = ms.counts
        other = ms.counted - ms.detected - c["survived"] - c["no tests"]
        score = "   n/a" if ms.score is None else f"{ms.score:5.1f}%"
        flag = "" if ms.score is None or ms.score >= floor else f"  < {floor:g}%"
        low = f"  {lower_bound(ms.detected, ms.counted):9.1f}%" if bounds and ms.counted else ""
        survived = c["survived"] + other
        print(
            f"{ms.module:34} {c['killed']:>6} {c['timeout']:>7} {survived:>8} {c['no tests']:>8}"
            f" {ms.equivalent:>5} {c['not checked']:>5} {score}{low}{flag}"
        )
    total_detected = sum(ms.detected for ms in scores)
    total = sum(ms.counted for ms in scores)
    if total:
        pooled = f"{'all core modules':34} {total_detected}/{total} detected: {100.0 * total_detected / total:.1f}%"
        print(pooled + (f" (95% lower {lower_bound(total_detected, total):.1f}%)" if bounds else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--floor", type=float, default=85.0, help="minimum %% of non-equivalent mutants killed")
    parser.add_argument("--survivors", action="store_true", help="list the surviving mutants of each module")
    parser.add_argument("--only", type=Path, help="score only the mutant names listed in this file (a sample)")
    parser.add_argument("--pooled", action="store_true", help="apply the floor to all modules together (samples)")
    parser.add_argument(
        "--bounds", action="store_true", help="a 95%% Wilson lower bound per module (a stratified random sample)"
    )
    parser.add_argument(
        "--equivalents", action="store_true", help="show each listed equivalent mutant's change beside its reason"
    )
    parser.add_argument("--pin", action="store_true", help="pin the unpinned equivalent entries to their change")
    args = parser.parse_args(argv)
    if args.pin:
        print(f"pinned {pin_equivalents()} entries of {EQUIVALENT_FILE.name}")
        return 0

    equivalents = read_equivalents()
    only = set(args.only.read_text(encoding="utf-8").split()) if args.only else None
    modules = core_modules()
    scores = score_modules(modules, equivalents, only)
    print_table(scores, args.floor, args.bounds)

    known = {name for m in modules for name in module_results(m)}
    entries = read_equivalent_entries()
    for name in stale_entries(entries, modules, known):
        print(f"warning: equivalent mutant {name} no longer exists; remove it from {EQUIVALENT_FILE.name}")
    for entry in entries:
        state = pin_state(entry)
        if state == "moved":
            change = " / ".join(mutant_change(entry.name) or [])
            print(f"warning: {entry.name} now names another mutant ({change}): counted; re-check and re-list it")
        elif state == "unpinned":
            print(f"warning: {entry.name} is not pinned: check it (--equivalents), then --pin")
        if args.equivalents and state != "unknown":
            print(f"{entry.name} [{state}]  # {entry.reason}")
            for line in mutant_change(entry.name) or []:
                print(f"    {line}")
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
