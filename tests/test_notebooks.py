"""Parquet export of a seeded store, and the analytics notebooks executed on the snapshot."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from agtos.cli import app
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.export import export_snapshot, memory_keys
from agtos.schemas import Conclusion, MaintenanceReport, Turn
from agtos.schemas.arrow import ALL_SCHEMAS
from agtos.schemas.records import now_ms
from agtos.tasks.parquet_snapshot import records_table
from tests.helpers import delete_prefix

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
DAY = 86_400_000
U, OTHER = "nb-user", "nb-other"
# (session id, days ago, turns): entities and relationships come from the session-end NER step
SESSIONS: list[tuple[str, int, list[tuple[str, str]]]] = [
    (
        "s-work",
        3,
        [
            ("user", "Alice works at Acme Corp in Berlin; her project Falcon is due Friday."),
            ("assistant", "Got it."),
            ("user", "Thanks, please keep that in mind for next week."),
        ],
    ),
    (
        "s-weather",
        2,
        [
            ("user", "What's the weather forecast for today?"),
            ("assistant", "Sunny, 14 degrees."),
            ("user", "I prefer metric units, always."),
            ("assistant", "Noted."),
        ],
    ),
    (
        "s-rain",
        1,
        [
            ("user", "How is the weather looking today?"),
            ("assistant", "Light rain, 9 degrees."),
            ("user", "Do I need an umbrella for the weather later?"),
            ("assistant", "Yes."),
        ],
    ),
    (
        "s-bob",
        0,
        [
            ("user", "Bob lives in Paris and knows Alice from university."),
            ("assistant", "Noted."),
            ("user", "Actually, Bob moved to Lyon last year."),
            ("assistant", "Updated."),
        ],
    ),
]
FIGURES = {
    "memory_analytics": {
        "episodes_over_time",
        "importance_distribution",
        "topic_mix",
        "entities_by_type",
        "relationship_types",
        "degree_distribution",
    },
    "lint_history": {"lint_conclusions", "lint_pruned_merged"},
}


def talk(coordinator: MemoryCoordinator, user_id: str, session_id: str, days_ago: int, turns: list[Any]) -> None:
    """Add the turns (dated ``days_ago``) and end the session through the coordinator."""
    stamp = now_ms() - days_ago * DAY
    for i, (role, content) in enumerate(turns):
        coordinator.add_turn(user_id, session_id, Turn(role=role, content=content, timestamp=stamp + i * 1000))
    assert coordinator.end_session(user_id, session_id).saved


def extra_conclusions(coordinator: MemoryCoordinator) -> None:
    """A near-duplicate and a weak conclusion, so the second sweep merges and prunes."""
    items = [
        Conclusion(
            id="con-nb-dup", user_id=U, text="User regularly asks about weather.", type="inductive", confidence=0.4
        ),
        Conclusion(id="con-nb-weak", user_id=U, text="User might own a sailing boat", type="abductive", confidence=0.2),
    ]
    coordinator.conclusions.upsert_many(items, coordinator.semantic.embedder.embed([c.text for c in items]))


@pytest.fixture(scope="module")
def seeded(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryCoordinator]:
    """Two users: sessions ended (episodes, memories, entities), a Dreamer run and two lint sweeps."""
    tmp = tmp_path_factory.mktemp("seeded")
    prefix = f"agtos-test-{uuid.uuid4().hex[:10]}"
    settings = Settings(redis_url=redis_url, key_prefix=prefix, data_dir=tmp / "data", config_dir=tmp / "config")
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always"))
    try:
        for session_id, days_ago, turns in SESSIONS:
            talk(coordinator, U, session_id, days_ago, turns)
        talk(coordinator, OTHER, "s-other", 5, SESSIONS[1][2])
        coordinator.dream(U)
        assert coordinator.maintain(U).summary["status"] == "completed"
        extra_conclusions(coordinator)
        second = coordinator.maintain(U).summary
        assert second["status"] == "completed" and second["merge"] >= 1 and second["prune"] >= 1
        yield coordinator
    finally:
        coordinator.close()
        delete_prefix(redis_url, prefix)


@pytest.fixture(scope="module")
def snapshot(seeded: MemoryCoordinator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "snapshot"
    export_snapshot(seeded.services, out)
    return out


def store_counts(coordinator: MemoryCoordinator, user_id: str) -> dict[str, int]:
    """Rows per kind, counted from the store by other paths than the export reads where possible."""
    entities = coordinator.entities.store
    triples = entities.index(user_id, "triples")
    return {
        "episodes": len(list(coordinator.episodes.iter_all(user_id))),
        "turns": coordinator.connector.run(
            lambda r: sum(r.llen(k) for k in r.scan_iter(match=f"{coordinator.keys.user(user_id).base}:turns:*"))
        ),
        "memories": coordinator.semantic.store("memory").count(user_id),
        "conclusions": len(coordinator.conclusions.all(user_id)),
        "entities": sum(entities.counts(user_id).values()),
        "relationships": coordinator.connector.run(lambda r: r.hlen(triples)),
        "profiles": coordinator.connector.run(lambda r: r.exists(coordinator.keys.user(user_id).profile())),
        "maintenance_reports": len(coordinator.maintenance.history(user_id, limit=1_000)),
    }


# the export's record kinds (one Parquet file each) and the arrow schema of each
EXPORT_KINDS = {
    "episodes": "episode",
    "turns": "stored_turn",
    "memories": "memory",
    "conclusions": "conclusion",
    "entities": "entity",
    "relationships": "relationship",
    "profiles": "profile",
    "maintenance_reports": "report",
}


def test_export_writes_the_contract_schemas_and_every_record(seeded: MemoryCoordinator, snapshot: Path) -> None:
    expected = {kind: 0 for kind in EXPORT_KINDS}
    for user_id in (U, OTHER):
        for kind, n in store_counts(seeded, user_id).items():
            expected[kind] += n
    assert expected["entities"] >= 4 and expected["relationships"] >= 1 and expected["memories"] >= 1
    assert expected["turns"] >= 2 * expected["episodes"]  # every turn of every session is exported
    assert expected["maintenance_reports"] == 2 and expected["conclusions"] >= 3
    manifest = json.loads((snapshot / "manifest.json").read_text())
    assert manifest["counts"] == expected and manifest["users"] == 2
    assert manifest["schemas"]["maintenance_reports"] == "MaintenanceReport"
    for kind, schema in EXPORT_KINDS.items():
        path = snapshot / f"{kind}.parquet"
        assert manifest["files"][kind] == path.name
        assert pq.read_schema(path).equals(ALL_SCHEMAS[schema], check_metadata=True), kind
        assert pq.read_metadata(path).num_rows == expected[kind], kind
    files = sorted(["manifest.json", *(f"{k}.parquet" for k in EXPORT_KINDS)])
    assert sorted(p.name for p in snapshot.iterdir()) == files
    assert not [p for p in snapshot.parent.iterdir() if p.name.startswith(".")]  # no temp dirs left behind

    episodes = pq.read_table(snapshot / "episodes.parquet").to_pylist()
    assert {e["id"] for e in episodes if e["user_id"] == U} == {e.id for e in seeded.episodes.iter_all(U)}
    reports = pq.read_table(snapshot / "maintenance_reports.parquet").to_pylist()
    assert [json.loads(r["summary"])["status"] for r in reports] == ["completed", "completed"]
    assert json.loads(reports[1]["steps"][0])["step"] == "stale"  # list[dict] fields: JSON text per item


def test_export_of_chosen_users_replaces_a_snapshot_but_not_other_dirs(
    seeded: MemoryCoordinator, tmp_path: Path
) -> None:
    out = tmp_path / "snap"
    export_snapshot(seeded.services, out)
    counts = export_snapshot(seeded.services, out, users=[OTHER])  # a previous snapshot is replaced atomically
    assert counts["episodes"] == 1 and counts["maintenance_reports"] == 0
    assert pq.read_table(out / "episodes.parquet").column("user_id").to_pylist() == [OTHER]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap"]
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        export_snapshot(seeded.services, precious)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious", "snap"]
    assert all(key.rsplit(":", 1)[1].startswith("mem-") for key in memory_keys(seeded.services, U))


def test_report_with_nested_steps_round_trips() -> None:
    report = MaintenanceReport(user_id="x", summary={"a": 1}, steps=[{"step": "stale", "ids": ["c1"]}])
    row = records_table([report], ALL_SCHEMAS["report"]).to_pylist()[0]
    assert json.loads(row["summary"]) == {"a": 1} and json.loads(row["steps"][0]) == {"step": "stale", "ids": ["c1"]}
    assert records_table([], ALL_SCHEMAS["episode"]).num_rows == 0


def test_cli_export(seeded: MemoryCoordinator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", seeded.settings.redis_url or "")
    monkeypatch.setenv("AGTOS_KEY_PREFIX", seeded.settings.key_prefix)
    monkeypatch.setenv("AGTOS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AGTOS_CONFIG_DIR", str(tmp_path / "config"))
    result = CliRunner().invoke(app, ["memory", "export", "--out", str(tmp_path / "cli"), "--user", U])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "cli" / "manifest.json").read_text())
    assert manifest["users"] == 1 and manifest["counts"] == store_counts(seeded, U)


@pytest.fixture
def python_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ``python3`` kernelspec that runs this interpreter (JUPYTER_PATH wins over user specs)."""
    from ipykernel.kernelspec import write_kernel_spec

    jupyter = tmp_path / "jupyter"
    write_kernel_spec(jupyter / "kernels" / "python3")
    spec = json.loads((jupyter / "kernels" / "python3" / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter))
    return "python3"


def run_notebook(name: str, snapshot: Path, figures: Path, kernel: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Execute a notebook (errors raise) and return its text outputs."""
    monkeypatch.setenv("AGTOS_SNAPSHOT_DIR", str(snapshot))
    monkeypatch.setenv("AGTOS_FIGURES_DIR", str(figures))
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells), "commit notebooks with cleared outputs"
    workdir = figures.parent
    nbclient.NotebookClient(
        notebook, kernel_name=kernel, timeout=180, resources={"metadata": {"path": str(workdir)}}
    ).execute()
    outputs = [out for cell in notebook.cells for out in cell.get("outputs", [])]
    assert not [out for out in outputs if out["output_type"] == "error"]
    return "".join(out.get("text", "") for out in outputs if out["output_type"] == "stream")


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_notebook_runs_on_the_seeded_snapshot(
    name: str, snapshot: Path, python_kernel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = tmp_path / "figures"
    text = run_notebook(name, snapshot, figures, python_kernel, monkeypatch)
    assert "no data" not in text
    made = {p.stem: p.stat().st_size for p in figures.glob("*.png")}
    assert set(made) == FIGURES[name] and all(size > 1_000 for size in made.values()), made


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_notebook_handles_an_empty_snapshot(
    name: str, seeded: MemoryCoordinator, python_kernel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    assert sum(export_snapshot(seeded.services, empty, users=[]).values()) == 0
    figures = tmp_path / "figures"
    text = run_notebook(name, empty, figures, python_kernel, monkeypatch)
    assert "no data" in text and not list(figures.glob("*.png"))


def test_every_notebook_is_executed_by_these_tests() -> None:
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(FIGURES)
