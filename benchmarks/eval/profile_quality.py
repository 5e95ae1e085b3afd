"""Profile quality on long conversations: how many profile lines are not preferences (issue 16).

Replays each conversation of a LoCoMo-shaped file (default ``../shared/datasets/realtalk-dev``) through
``add_turn`` / ``end_session`` (the Dreamer runs at each end, rules only), then counts the profile's
preference lines that state no like/dislike/preference, or run longer than one line, and the facts
without a source.

    nice -n 10 .venv/bin/python -m benchmarks.eval.profile_quality [--dataset PATH] [--limit 1]
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Role, Turn
from benchmarks.eval.dataset import load_dataset
from benchmarks.eval.harness import (
    DEFAULT_REDIS_URL,
    TURN_SPACING_MS,
    agtos_session_id,
    agtos_user_id,
    delete_prefix,
    make_settings,
)

DEFAULT_DATASET = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "realtalk-dev" / "realtalk-dev.json"
#: a preference line says what someone likes, loves, prefers, enjoys, hates, dislikes, or their favourite
PREFERENCE = re.compile(
    r"\b(likes?|loves?|prefers?|enjoys?|hates?|dislikes?|favou?rite|would rather|can't stand|"
    r"(?:does not|doesn't) like|adores?|is an? (?:\w+ )?fan of|is into)\b",
    re.I,
)
ONE_LINE_WORDS = 20


def is_preference_line(line: str) -> bool:
    """A like/dislike/preference, one line long, no question, no "Name:" transcript prefix."""
    return (
        PREFERENCE.search(line) is not None
        and len(line.split()) <= ONE_LINE_WORDS
        and "?" not in line
        and re.match(r"^[A-Z][\w ]{0,30}: ", line) is None
    )


def measure(coordinator: MemoryCoordinator, dataset_path: Path, limit: int | None) -> list[dict[str, Any]]:
    dataset = load_dataset(dataset_path)
    rows = []
    for haystack in dataset.haystacks[:limit]:
        user_id = agtos_user_id(haystack.haystack_id)
        stamps = haystack.session_timestamps_ms()
        for i in sorted(range(len(stamps)), key=lambda i: (stamps[i], i)):
            sid = agtos_session_id(haystack.haystack_session_ids[i])
            turns = [t for t in haystack.haystack_sessions[i] if t.content.strip()]
            for n, t in enumerate(turns):
                turn = Turn(
                    role=Role(t.role),
                    content=t.content[:100_000],
                    name=t.name,
                    timestamp=stamps[i] + n * TURN_SPACING_MS,
                )
                coordinator.add_turn(user_id, sid, turn)
            if turns:
                coordinator.end_session(user_id, sid)
        coordinator.dream(user_id)
        profile = coordinator.get_profile(user_id)
        junk = [p for p in profile.preferences if not is_preference_line(p)]
        unsourced = [line for line in profile.preferences + profile.facts if not profile.sources.get(line)]
        rows.append(
            {
                "conversation": haystack.haystack_id,
                "preferences": len(profile.preferences),
                "not_preferences": len(junk),
                "facts": len(profile.facts),
                "without_source": len(unsourced),
                "examples": junk[:5],
                "kept": profile.preferences[:8],
                "key_facts": profile.facts[:8],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--limit", type=int, default=None, help="conversations to replay")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    args = parser.parse_args(argv)
    if not args.dataset.exists():
        print(f"optional dataset: {args.dataset} is absent; nothing measured")
        return 0
    prefix = f"agtos-profile-{uuid.uuid4().hex[:10]}"
    work_dir = Path(tempfile.mkdtemp(prefix="agtos-profile-"))
    coordinator = MemoryCoordinator(make_settings(args.redis_url, prefix, work_dir))
    try:
        rows = measure(coordinator, args.dataset, args.limit)
    finally:
        coordinator.close()
        delete_prefix(args.redis_url, prefix)
        shutil.rmtree(work_dir, ignore_errors=True)
    print("| conversation | preference lines | not preferences | key facts | lines without a source |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['conversation']} | {row['preferences']} | {row['not_preferences']} | {row['facts']} "
            f"| {row['without_source']} |"
        )
    for row in rows:
        print(
            f"\n{row['conversation']}: not preferences {row['examples']}\n"
            f"  kept {row['kept']}\n  facts {row['key_facts']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
