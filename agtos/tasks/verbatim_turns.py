"""Verbatim turns of an ended session: the stored records (position, speaker, resolved dates) and
the units the turn index holds.

A unit is one turn's dated speaker line (``(8 May 2023) Caroline: …``); a text longer than the
embedder's window is split into overlapping token windows, each its own unit mapping back to the
turn, so no word is past what the vector index sees (see ``benchmarks/turn_units.py`` for the
choice of unit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agtos.schemas import Episode, IngestItem, Memory, Role, StoredTurn, Turn
from agtos.tasks.dates import annotate, resolve_dates, turn_prefix
from agtos.tasks.speakers import utterances
from agtos.tasks.tokens import count_tokens, load_tokenizer

WINDOW_TOKENS = 254  # the embedder's 256-token window (providers.embeddings.MINILM_MAX_TOKENS) less [CLS], [SEP]
OVERLAP_TOKENS = 32  # a phrase across a window edge is whole in the next window


@dataclass(frozen=True)
class TurnUnit:
    """One indexed text: a turn (or one window of a long turn) of one episode."""

    user_id: str
    episode_id: str
    position: int
    chunk: int
    text: str


def stored_turns(user_id: str, episode_id: str, session_id: str, turns: Sequence[Turn]) -> list[StoredTurn]:
    """The session's turns as stored: positions 0.. in order (working-memory summaries are not what
    anyone said and are left out), the content and timestamp as sent, the speaker's name
    (``turn.name``, else a ``"Name: "`` prefix the conversation uses, see :mod:`agtos.tasks.speakers`)
    and relative dates resolved against the turn's time."""
    said = [u for u in utterances(list(turns)) if not u.turn.is_summary]
    return [
        StoredTurn(
            user_id=user_id,
            episode_id=episode_id,
            session_id=session_id,
            position=position,
            role=Role(u.turn.role),
            name=u.turn.name or u.speaker,
            content=u.turn.content,
            timestamp=u.turn.timestamp,
            dates=resolve_dates(u.turn.content, u.turn.timestamp, u.turn.utc_offset),
            utc_offset=u.turn.utc_offset,
        )
        for position, u in enumerate(said)
    ]


def batch_turns(items: Sequence[IngestItem], episodes: Sequence[Episode]) -> list[StoredTurn]:
    """The stored turns of an ingestion batch's episodes: an item's turns go with its episode (the
    one it brings, by id, else the one made of its session, by user and session id)."""
    brought = {i.episode.id: i.turns for i in items if i.episode is not None and i.turns}
    made = {(i.user_id, i.session_id): i.turns for i in items if i.episode is None and i.turns}
    out: list[StoredTurn] = []
    for episode in episodes:
        turns = brought.get(episode.id) or made.get((episode.user_id, episode.session_id), [])
        out += stored_turns(episode.user_id, episode.id, episode.session_id, turns)
    return out


def chunk_spans(text: str, max_tokens: int = WINDOW_TOKENS, overlap: int = OVERLAP_TOKENS) -> list[tuple[int, int]]:
    """Character spans of ``text`` of at most ``max_tokens`` tokens each (the embedder's tokenizer),
    consecutive ones sharing ``overlap`` tokens; one span for a text that fits."""
    if max_tokens <= overlap or overlap < 0:
        raise ValueError("need max_tokens > overlap >= 0")
    offsets = load_tokenizer().encode(text, add_special_tokens=False).offsets
    if len(offsets) <= max_tokens:
        return [(0, len(text))]
    spans, start = [], 0
    while True:
        end = min(start + max_tokens, len(offsets))
        spans.append((offsets[start][0], offsets[end - 1][1]))
        if end == len(offsets):
            return spans
        start = end - overlap


def turn_units(turns: Sequence[StoredTurn]) -> list[TurnUnit]:
    """The index units of ``turns``: the dated speaker line of each turn (``(8 May 2023) Caroline:
    … yesterday [= 7 May 2023]``), or one per window of a long turn's text, each window behind the
    date and name and the whole within the embedder's window."""
    units: list[TurnUnit] = []
    for turn in turns:
        prefix, body = turn_prefix(turn), annotate(turn.content, turn.dates)
        room = max(OVERLAP_TOKENS + 1, WINDOW_TOKENS - count_tokens(prefix))
        for chunk, (start, end) in enumerate(chunk_spans(body, room)):
            units.append(TurnUnit(turn.user_id, turn.episode_id, turn.position, chunk, prefix + body[start:end]))
    return units


def episode_vectors(
    units: Sequence[TurnUnit], unit_vectors: np.ndarray, memories: Sequence[Memory] = (), memory_vectors: Any = None
) -> dict[str, np.ndarray]:
    """The vector of each episode with turn units, without embedding its summary again: the mean
    of its units' unit vectors and the mean of its facts' (``memories`` that name it as a source),
    added with equal weight and normalised (``benchmarks/ingest.py`` measures the time it saves,
    ``benchmarks/eval/api_eval.py`` the recall)."""
    groups: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for unit, row in zip(units, unit_vectors, strict=True):
        groups.setdefault(unit.episode_id, ([], []))[0].append(row)
    for memory, row in zip(memories, [] if memory_vectors is None else memory_vectors, strict=True):
        for episode_id in memory.source_episode_ids:
            if episode_id in groups:
                groups[episode_id][1].append(row)
    return {episode_id: _unit_sum(_unit_mean(rows) for rows in parts if rows) for episode_id, parts in groups.items()}


def _unit_mean(rows: list[np.ndarray]) -> np.ndarray:
    return _unit_sum(np.asarray(rows, dtype=np.float32))


def _unit_sum(rows: Any) -> np.ndarray:
    total = np.asarray(np.sum(list(rows), axis=0, dtype=np.float32))
    return total / max(float(np.linalg.norm(total)), 1e-12)


@dataclass(frozen=True)
class TurnBatch:
    """An ingestion batch's stored turns and their index units (embedded with the rest of the batch)."""

    turns: list[StoredTurn]
    units: list[TurnUnit]

    @classmethod
    def of(cls, turns: list[StoredTurn]) -> TurnBatch:
        return cls(turns, turn_units(turns))
