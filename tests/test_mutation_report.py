"""tools/mutation_report.py: the equivalent-mutant list is pinned to each mutant's change, so a list
entry whose mutant number now names another change (mutmut renumbers a function's mutants when it
changes) is counted instead of hiding a live mutant."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from mutation_report import (
    Equivalent,
    mutant_change,
    pin_equivalents,
    pin_of,
    pin_state,
    read_equivalent_entries,
    read_equivalents,
    stale_entries,
)

MUTANTS = """
def x_f__mutmut_orig(a, b):
    return a if a < b else b

def x_f__mutmut_1(a, b):
    return a if a <= b else b

def x_f__mutmut_2(a, b):
    return a if a > b else b
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[tool.mutmut]\nonly_mutate = ["pkg/mod.py"]\n', encoding="utf-8")
    (tmp_path / "mutants" / "pkg").mkdir(parents=True)
    (tmp_path / "mutants" / "pkg" / "mod.py").write_text(MUTANTS, encoding="utf-8")
    return tmp_path


def test_a_mutants_change_is_read_from_mutmuts_copy(root: Path) -> None:
    assert mutant_change("pkg.mod.x_f__mutmut_1", root) == ["-return a if a < b else b", "+return a if a <= b else b"]
    assert mutant_change("pkg.mod.x_f__mutmut_9", root) is None  # no such mutant
    assert mutant_change("other.mod.x_f__mutmut_1", root) is None  # not a mutated module


def test_pins_tell_a_checked_entry_from_a_renumbered_one(root: Path) -> None:
    first = pin_of(["-return a if a < b else b", "+return a if a <= b else b"])
    listing = root / "equivalent.txt"
    listing.write_text(
        "# comment\n"
        f"pkg.mod.x_f__mutmut_1 [{first}]  # `<` -> `<=`: equal values give the same result\n"
        f"pkg.mod.x_f__mutmut_2 [{first}]  # listed as _1 was, before the numbers moved\n"
        "pkg.mod.x_f__mutmut_9  # gone\n",
        encoding="utf-8",
    )
    entries = read_equivalent_entries(listing)
    assert [(e.name, e.pin) for e in entries] == [
        ("pkg.mod.x_f__mutmut_1", first),
        ("pkg.mod.x_f__mutmut_2", first),
        ("pkg.mod.x_f__mutmut_9", None),
    ]
    assert [pin_state(e, root) for e in entries] == ["ok", "moved", "unknown"]
    assert pin_state(Equivalent("pkg.mod.x_f__mutmut_2", "why", None), root) == "unpinned"
    assert set(read_equivalents(listing, root)) == {"pkg.mod.x_f__mutmut_1", "pkg.mod.x_f__mutmut_9"}


def test_pin_writes_the_current_change_of_unpinned_entries_only(root: Path) -> None:
    listing = root / "equivalent.txt"
    listing.write_text("pkg.mod.x_f__mutmut_1 [00000000]  # kept\npkg.mod.x_f__mutmut_2  # why\n", encoding="utf-8")
    assert pin_equivalents(listing, root) == 1
    second = pin_of(["-return a if a < b else b", "+return a if a > b else b"])
    assert listing.read_text(encoding="utf-8").splitlines() == [
        "pkg.mod.x_f__mutmut_1 [00000000]  # kept",
        f"pkg.mod.x_f__mutmut_2 [{second}]  # why",
    ]


def test_an_entry_without_a_reason_is_refused(tmp_path: Path) -> None:
    listing = tmp_path / "equivalent.txt"
    listing.write_text("pkg.mod.x_f__mutmut_1 [1234abcd]\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="has no reason"):
        read_equivalent_entries(listing)


def test_a_stratified_draw_takes_n_of_every_module_and_repeats_with_its_seed() -> None:
    from mutation_sample import draw

    candidates = {
        "a.py": [f"a.x_f__mutmut_{i}" for i in range(1, 101)],
        "b.py": [f"b.x_g__mutmut_{i}" for i in range(1, 41)],
        "c.py": ["c.x_h__mutmut_1", "c.x_h__mutmut_2"],  # fewer than asked: all of them
    }
    sample = draw(candidates, seed=7, size=60, per_module=10)
    assert len(sample) == 22
    assert sum(n.startswith("a.") for n in sample) == 10
    assert sum(n.startswith("b.") for n in sample) == 10
    assert {"c.x_h__mutmut_1", "c.x_h__mutmut_2"} <= set(sample)
    assert sample == sorted(sample) == draw(candidates, seed=7, size=60, per_module=10)
    assert draw(candidates, seed=8, size=60, per_module=10) != sample
    pooled = draw(candidates, seed=7, size=60, per_module=0)  # the CI sample: 60 of the 142 together
    assert len(pooled) == 60 and len(set(pooled)) == 60


def test_the_lower_bound_is_wilsons_95_percent_interval() -> None:
    from mutation_report import lower_bound

    # Wilson score interval, z = 1.96: all 30 killed -> n / (n + z^2) = 30 / 33.8416
    assert lower_bound(30, 30) == pytest.approx(88.649, abs=0.01)
    # 27 of 30 (p = 0.9): (p + z^2/2n - z*sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n) = 0.7438
    assert lower_bound(27, 30) == pytest.approx(74.38, abs=0.05)
    assert lower_bound(0, 5) == 0.0


def test_only_the_mutated_modules_entries_can_be_stale() -> None:
    """An entry of a core module whose mutant mutmut no longer makes is reported; one of a file the
    core run does not mutate (listed by a run over that file) is not; nothing when nothing ran."""
    entries = [
        Equivalent("pkg.mod.x_f__mutmut_1", "same", None),
        Equivalent("pkg.mod.x_f__mutmut_9", "renamed since", None),
        Equivalent("pkg.other.x_g__mutmut_1", "not in the core", None),
        Equivalent("pkg.module.x_h__mutmut_1", "a module whose name extends mod's", None),
    ]
    known = {"pkg.mod.x_f__mutmut_1", "pkg.mod.x_f__mutmut_2"}
    assert stale_entries(entries, ["pkg/mod.py"], known) == ["pkg.mod.x_f__mutmut_9"]
    assert stale_entries(entries, ["pkg/mod.py"], set()) == []
