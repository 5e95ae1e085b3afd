"""Recall: episode search, context assembly and the Dialectic ``ask``, over the services.

One query is searched in every namespace it needs with one embedding (``search_many``), without
the names of the people who speak in the user's conversations (:func:`without_speakers`), nor the
names they call each other by ("Hey Kate!" to a speaker named Emi, :func:`addressed_names`). The
verbatim turns are the main evidence: an episode ranks by its best evidence (weighted RRF of
its turn hits, its own summary hit and the memories drawn from it, :func:`fuse_evidence`), and
a search hit shows the turns that matched. The context (:mod:`agtos.memory.context_builder`)
spends its budget on that evidence. The facade validates ids and privacy before calling these.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import redis

from agtos.memory.working import WorkingMemory
from agtos.providers.llm import LLMError
from agtos.schemas import Conclusion, Episode, Memory, StoredTurn, UserProfile
from agtos.storage.redis_conn import members
from agtos.storage.semantic_store import SearchResult
from agtos.storage.turns import TurnMatch, parse_turn_doc_id, turn_doc_id
from agtos.tasks.answer_builder import build_answer
from agtos.tasks.bm25 import query_terms as terms_of
from agtos.tasks.bm25 import rank_texts
from agtos.tasks.context import ContextItem, chunk_offset, focus
from agtos.tasks.dates import annotate, attributed, format_turn, named_days, speaker, turn_datetime
from agtos.tasks.dialectic import Evidence, llm_answer
from agtos.tasks.distil import memory_id
from agtos.tasks.ranking import (
    RECENCY_WEIGHT,
    display_score,
    fuse_evidence,
    max_evidence_score,
    max_fused_score,
    named_speakers,
    recency_weight,
    reciprocal_rank_fusion,
    rerank_by_recency,
    without_speakers,
)
from agtos.tasks.text import content_words, normalise
from agtos.tasks.validity import about, after_replacements, asks_about_the_past, claims_of

if TYPE_CHECKING:
    import numpy as np

    from agtos.memory.semantic import SemanticSearch
    from agtos.memory.services import Services

log = logging.getLogger(__name__)

#: a question in the past tense ("What car did Gina buy?", "When did I move?"): it asks what happened
_DID = re.compile(r"\bdid\b", re.IGNORECASE)
#: ... unless it asks how things turned out ("How much did we end up raising?")
_OUTCOME = re.compile(r"\b(?:end(?:ed)? up|in the end|so far)\b", re.IGNORECASE)

#: how much each kind of evidence counts when episodes are ranked (weighted RRF, k = 60)
EVIDENCE_WEIGHTS = {"turn": 1.0, "episode": 0.5, "memory": 0.25, "day": 1.0, "current": 1.0}
# day: held on a day the query names; current: where the current value of an attribute asked about now was said
# (:func:`current_fact_episodes`)
EVIDENCE_DEPTH = 1  # an episode's turns counted: its best one
TURNS_PER_HIT = 5  # turn hits searched per episode hit asked for
FACTS_PER_HIT = 0  # memory hits searched per episode hit asked for, their source episodes as evidence (on the
# dev sets they cost recall@1: off)
HIGHLIGHTS = 3  # matching turns shown per search hit
# one embedder window; a longer highlight is cut to its sentences that share the query's words ("…" where cut)
HIGHLIGHT_TOKENS = 256
DATED_TURNS = 20  # turns of the days a question names (by date), fused with the index's turn hits
DATED_EPISODES = 20  # sessions read per named day
DATED_WEIGHT = 1.0  # their weight in that fusion (the index's hits weigh 1)
_DAY_MS = 86_400_000
#: a search's ``degraded``: no host, port or error text (the server log has the reason)
EMBEDDER_DOWN = "embedder unavailable: keyword search only"
#: a search's ``degraded`` while some of the user's records wait for ``agtos reindex`` (another embedder
#: made their vectors: they are not compared, those records match by keyword only)
STALE_VECTORS = "embedder changed: records not yet reindexed match by keyword only (run `agtos reindex`)"
PROFILE_LINES = 3  # at most this many profile lines in a context (those that share a word with the query)
SPEAKER_SESSIONS = 3  # the latest sessions whose speakers' names are left out of a search query
#: a turn hit said by someone the question does not name counts 1 / this when sessions are ranked
#: (the context's ``SPEAKER_BONUS``); one whose words are said in several of the sessions found (a
#: formula: "Okay I need to get back to work, chat later!") counts 1 / that many
OTHER_SPEAKER = 1.5
FORMULA_SESSIONS = 3  # a turn's words said in this many sessions among the hits make it a formula
SUPERSEDED_WEIGHT = 0.5  # a superseded fact's score counts this much (its current replacement is added)
SUPERSEDED_HOPS = 3  # replacements followed from a superseded fact to the current one
ADDRESSED_MIN = 2  # a name one speaker calls the other this often (latest sessions) is the other's name too
# a name said to someone: "Hey Kate!", "Thank you Kate, …", "What about you, Kate?"
_ADDRESSED = re.compile(
    r"\b(?:hey|hi|hello|thanks|thank you|bye|night|morning|you),?\s+(?P<name>[A-Z][a-z]+)(?=\s*[!?.,]|$)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Highlight:
    """A turn of the hit's episode that matched the query."""

    turn: StoredTurn
    score: float
    terms: frozenset[str] = frozenset()  # the query's, for cutting a long turn to what matched
    chunk: int = 0  # the window of a long turn that matched (its index unit ``….c<n>``)

    @property
    def speaker(self) -> str:
        return speaker(self.turn)

    @property
    def role(self) -> str:
        return str(self.turn.role)

    @property
    def timestamp(self) -> int:
        return self.turn.timestamp

    @property
    def position(self) -> int:
        return self.turn.position

    @property
    def text(self) -> str:
        """What was said, relative dates resolved (``yesterday [= 7 May 2023]``); a turn longer than
        :data:`HIGHLIGHT_TOKENS` tokens cut to its sentences that share the query's words (else the
        matched window), ``…`` where cut."""
        said = annotate(self.turn.content, self.turn.dates)
        if len(said) <= HIGHLIGHT_TOKENS:  # a token is one character at least
            return said
        return focus(said, self.terms, HIGHLIGHT_TOKENS, chunk_offset(self.turn, self.chunk))


@dataclass(frozen=True)
class SearchHit:
    episode: Episode
    score: float
    match_type: str
    highlights: tuple[Highlight, ...] = ()

    @property
    def timestamp(self) -> int:
        return self.episode.timestamp

    @property
    def session_id(self) -> str:
        return self.episode.session_id


@dataclass
class Found:
    """What one query found: episodes by best evidence, turns (best first, 0-1), memories, conclusions."""

    episodes: list[SearchHit] = field(default_factory=list)
    turns: list[TurnMatch] = field(default_factory=list)
    memories: list[tuple[Memory, float]] = field(default_factory=list)
    conclusions: list[tuple[Conclusion, float]] = field(default_factory=list)
    speakers: set[str] = field(default_factory=set)  # the names of the people who speak in the user's sessions
    aliases: dict[str, str] = field(default_factory=dict)  # another name a speaker is called by -> the speaker
    degraded: str | None = None  # why the search was not what was asked (the embedder was down: keyword only)

    def asked(self, query: str) -> set[str]:
        """The speakers ``query`` names (lower case), by their name or by what the other calls them."""
        called = {a.lower(): s.lower() for a, s in self.aliases.items()}
        return {called.get(n, n) for n in named_speakers(query, self.speakers | set(self.aliases))}

    @property
    def names(self) -> set[str]:
        """Every name a speaker goes by."""
        return self.speakers | set(self.aliases)


def _scaled(found: SemanticSearch, hit: SearchResult) -> float:
    return display_score(hit.score, found.mode, found.max_score)


def _match_type(types: set[str]) -> str:
    if "hybrid" in types or {"semantic", "keyword"} <= types:
        return "hybrid"
    return "semantic" if "semantic" in types else "keyword"


def recall(
    rt: Services,
    user_id: str,
    query: str,
    limit: int,
    mode: str | None = None,
    turns: int | None = None,
    memories: int = 0,
    conclusions: int = 0,
    neighbours: int = 0,
    who: Found | None = None,
    shown: int | None = None,
) -> Found:
    """Search the namespaces a caller needs with one query embedding; episodes are fused from
    their turn hits, their own summary hit and (when searched) the memories drawn from them.
    ``who``: :func:`people` already read for this request; ``shown``: only the first ``shown``
    (at least ``limit``) episode hits are wanted (the others' records are not parsed, only their
    timestamps for the recency re-rank)."""
    wanted = {"episode": min(100, limit * 2), "turn": turns or min(200, limit * TURNS_PER_HIT)}
    if memories:
        wanted["memory"] = memories
    if conclusions:
        wanted["conclusion"] = conclusions
    # the index mirrors' version checks and the user's latest sessions (for people) in one round trip
    timeline = rt.keys.user(user_id).episode_timeline()
    reads = [] if who is not None else [lambda pipe: pipe.zrevrange(timeline, 0, SPEAKER_SESSIONS - 1)]
    # the query embeds (in another thread) while the round trip below runs, without the speakers'
    # names as last read for this user (they seldom change: if they did, it embeds again)
    names = who.names if who is not None else _last_names(user_id)
    early = rt.semantic.embed_soon(without_speakers(query, names), mode) if names is not None else None
    prepared = rt.semantic.prepare(user_id, list(wanted), mode, reads)
    out = replace(who) if who is not None else people(rt, user_id, members(prepared.replies[0]))
    searched = without_speakers(query, out.names)
    # the records of every hit (turns with their neighbours, the turn hits' episodes) in one round trip, with
    # the memories of the facts of those episodes whose facts this process knows (prefer_current_episodes)
    asked: list[str] = []
    past = asks_what_happened(query)
    prefetch = None if past else partial(_known_fact_memories, user_id, asked)
    found = rt.semantic.search_many(
        user_id,
        searched,
        wanted,
        mode,
        neighbours=neighbours,
        turn_episodes=True,
        prepared=prepared,
        embedding=early,
        prefetch=prefetch,
    )
    stale = STALE_VECTORS if any(f.stale for f in found.values()) else None
    out.degraded = EMBEDDER_DOWN if any(f.degraded for f in found.values()) else stale
    turn_found = found["turn"]
    scaled = {h.id: _scaled(turn_found, h) for h in turn_found.results}
    kinds = {h.id: h.match_type for h in turn_found.results}
    out.turns = [
        TurnMatch(m.turn, max(scaled[d] for d in m.doc_ids), m.doc_ids, m.before, m.after)
        for m in rt.semantic.turns.lookup(user_id, turn_found.results, neighbours)
    ]
    out.turns.sort(key=lambda m: -m.score)
    asked_about = out.asked(query)
    if asked_about:  # the turns of the people asked about first (also where they fuse with a named day's)
        out.turns = session_evidence(out.turns, asked_about, formulas=False)
    days = named_days(query)
    dated = dated_turns(rt, user_id, searched, days, neighbours) if days else []
    out.turns = _with_dated(out.turns, dated)
    if "memory" in found:
        scored = [
            (Memory.model_validate_json(h.payload), _scaled(found["memory"], h))
            for h in found["memory"].results
            if h.payload is not None
        ]
        # asked about the past: a superseded fact counts in full and its replacement is not added
        out.memories = sorted(scored, key=lambda pair: -pair[1]) if past else prefer_current(rt, user_id, scored)
    if "conclusion" in found:
        out.conclusions = [
            (Conclusion.model_validate_json(h.payload), _scaled(found["conclusion"], h))
            for h in found["conclusion"].results
            if h.payload is not None
        ]
    episode_found = found["episode"]
    payloads = episode_found.related | {h.id: h.payload for h in episode_found.results if h.payload is not None}
    turn_evidence = weighted_evidence(out.turns, asked_about)
    evidence = {
        "turn": [m.turn.episode_id for m, _ in turn_evidence],
        "episode": [h.id for h in episode_found.results if h.payload is not None],
        "memory": [e for memory, _ in out.memories for e in memory.source_episode_ids[:1]],
        "day": [m.turn.episode_id for m in dated],
        "current": [] if past else current_fact_episodes(rt, user_id, query, asked_about),
    }
    turn_scores = {"turn": [weight for _, weight in turn_evidence]}
    fused = fuse_evidence(evidence, EVIDENCE_WEIGHTS, depth=EVIDENCE_DEPTH, scored=turn_scores)
    missing = [e for e, _ in fused if e not in payloads]
    payloads |= rt.semantic.records("episode", user_id, missing) if missing else {}
    types: dict[str, set[str]] = {}
    for h in episode_found.results:
        types.setdefault(h.id, set()).add(h.match_type)
    for m in out.turns:
        types.setdefault(m.turn.episode_id, set()).update(kinds.get(d, "keyword") for d in m.doc_ids)
    # the displayed score: how strong the best evidence is, in the mode's 0-1 scale (a cosine in vector mode)
    best: dict[str, float] = {}
    evidence_scores = [(h.id, _scaled(episode_found, h)) for h in episode_found.results]
    evidence_scores += [(m.turn.episode_id, m.score) for m in out.turns]
    evidence_scores += [(e, score) for memory, score in out.memories for e in memory.source_episode_ids[:1]]
    for episode_id, score in evidence_scores:
        best[episode_id] = max(score, best.get(episode_id, 0.0))
    top = max_evidence_score({k: v for k, v in EVIDENCE_WEIGHTS.items() if evidence.get(k)}, EVIDENCE_DEPTH) or 1.0
    # scored by the fusion for the recency re-rank (which reads only their timestamps), then shown with
    # their best evidence's score
    fused_hits = [
        _Fused(episode_id, score / top, _timestamp(payloads[episode_id]))
        for episode_id, score in fused
        if episode_id in payloads  # else expired or forgotten since it was indexed
    ]
    reranked = rerank_by_recency(fused_hits, recency_weight(query))
    picked = reranked if shown is None else reranked[: max(shown, limit)]
    matched = highlights(out.turns, {h.id for h in picked}, query)
    out.episodes = [
        SearchHit(
            Episode.model_validate_json(payloads[h.id]),
            round(best.get(h.id, 0.0), 4),
            _match_type(types.get(h.id, {"keyword"})),
            tuple(matched.get(h.id, ())),
        )
        for h in picked
    ]
    current = prefer_current_episodes(rt, user_id, query, out.episodes[:limit], episode_found.memories, set(asked))
    shown_ids = {h.episode.id for h in current}
    out.episodes = current + [h for h in out.episodes[limit:] if h.episode.id not in shown_ids]
    return out


def asks_what_happened(query: str) -> bool:
    """Whether a question asks about the past, so that a later fact ending what an earlier one
    stated does not make the earlier one less of an answer: it asks how things were ("where did I
    live before?"), or what happened (past tense, "What car did Gina buy?") without asking where
    things stand now ("now", "still", "latest": :func:`recency_weight`) or how they turned out
    ("did we end up raising"), and without naming a day ("What did Elise play on 5 Jan 2024?": the
    day's sessions are its evidence, ranked as before)."""
    if asks_about_the_past(query):
        return True
    if not _DID.search(query) or _OUTCOME.search(query) or recency_weight(query) != RECENCY_WEIGHT:
        return False
    return not named_days(query)


def session_evidence(turns: list[TurnMatch], asked: Collection[str] = (), formulas: bool = True) -> list[TurnMatch]:
    """``turns`` in the order they rank sessions (:func:`weighted_evidence`)."""
    return [m for m, _ in weighted_evidence(turns, asked, formulas)]


def weighted_evidence(
    turns: list[TurnMatch], asked: Collection[str] = (), formulas: bool = True
) -> list[tuple[TurnMatch, float]]:
    """``turns`` with their weight as session evidence, best first: the score, divided by :data:`OTHER_SPEAKER`
    for a turn said by someone ``asked`` (lower-case names) does not name, and (``formulas``) a formula (its
    words said in :data:`FORMULA_SESSIONS` or more sessions among ``turns``) weighs its best turn's score divided
    by the number of those sessions: its turns are the same evidence, tied (they share a rank in the evidence
    fusion, whichever of them the vector search put first: issue 14)."""
    said = [normalise(m.turn.content) for m in turns]
    sessions: dict[str, set[str]] = {}
    best: dict[str, float] = {}
    for m, words in zip(turns, said, strict=True):
        sessions.setdefault(words, set()).add(m.turn.episode_id)
        best[words] = max(best.get(words, m.score), m.score)

    def weight(m: TurnMatch, words: str) -> float:
        other = OTHER_SPEAKER if asked and (m.turn.name or "").lower() not in asked else 1.0
        repeated = len(sessions[words])
        if formulas and repeated >= FORMULA_SESSIONS:
            return best[words] / other / repeated
        return m.score / other

    return sorted(((m, weight(m, words)) for m, words in zip(turns, said, strict=True)), key=lambda pair: -pair[1])


@dataclass(frozen=True)
class _Fused:
    """An episode fused from its evidence, before its record is parsed (:func:`rerank_by_recency`)."""

    id: str
    score: float
    timestamp: int


#: an episode record's ``timestamp`` key and value (every ``"`` inside a JSON string is escaped, so
#: ``"timestamp":`` is only ever a key; an episode has no nested objects)
_TIMESTAMP = re.compile(r'"timestamp"\s*:\s*(\d+)\s*[,}]')


def _timestamp(payload: str) -> int:
    """The ``timestamp`` of an episode record's JSON as :class:`Episode` reads it, without parsing the
    rest (~1 µs, a parse ~15 µs); a record with no such key or with several is parsed."""
    found = _TIMESTAMP.findall(payload)
    return int(found[0]) if len(found) == 1 else Episode.model_validate_json(payload).timestamp


_CHUNK = re.compile(r"\.t\d+\.c(\d+)$")


def highlights(
    turns: list[TurnMatch], episodes: Collection[str] | None = None, query: str = ""
) -> dict[str, list[Highlight]]:
    """Episode id -> its first :data:`HIGHLIGHTS` matched turns, in the order of ``turns`` (one pass);
    ``episodes``: only those episodes'; long turns are cut to what shares ``query``'s words."""
    terms = frozenset(terms_of(query))
    out: dict[str, list[Highlight]] = {}
    for m in turns:
        if episodes is not None and m.turn.episode_id not in episodes:
            continue
        listed = out.setdefault(m.turn.episode_id, [])
        if len(listed) < HIGHLIGHTS:
            chunk = _CHUNK.search(m.doc_ids[0]) if m.doc_ids else None
            listed.append(Highlight(m.turn, m.score, terms, int(chunk[1]) if chunk else 0))
    return out


def _latest_turns(rt: Services, user_id: str) -> tuple[list[str], list[StoredTurn]]:
    """The ids of the user's latest :data:`SPEAKER_SESSIONS` sessions and their turns."""
    timeline = rt.keys.user(user_id).episode_timeline()
    latest = members(rt.connector.run(lambda r: r.zrevrange(timeline, 0, SPEAKER_SESSIONS - 1)))
    return latest, rt.semantic.turns.of_episodes(user_id, latest) if latest else []


def speaker_names(rt: Services, user_id: str) -> set[str]:
    """The names of the people who speak in the user's latest :data:`SPEAKER_SESSIONS` sessions."""
    return {t.name for t in _latest_turns(rt, user_id)[1] if t.name}


#: (user, episode ids) -> the speakers' names in those episodes' turns, and their addressed_names
_PEOPLE: dict[tuple[str, ...], tuple[frozenset[str], dict[str, str]]] = {}
_PEOPLE_KEPT = 4096
#: user -> the key of :data:`_PEOPLE` that :func:`people` last read for them
_LATEST: dict[str, tuple[str, ...]] = {}


def _last_names(user_id: str) -> set[str] | None:
    """The names :func:`people` last found for the user (None: none known in this process)."""
    known = _PEOPLE.get(_LATEST.get(user_id, ()))
    return None if known is None else set(known[0]) | set(known[1])


def people(rt: Services, user_id: str, latest: list[str] | None = None) -> Found:
    """Who speaks in the user's latest sessions, and the other names they are called by (their turns
    are read once per set of latest sessions: an episode id is a digest of its turns, so its turns
    never change). ``latest``: the ids of those sessions already read (else one ZREVRANGE)."""
    if latest is None:
        timeline = rt.keys.user(user_id).episode_timeline()
        latest = members(rt.connector.run(lambda r: r.zrevrange(timeline, 0, SPEAKER_SESSIONS - 1)))
    key = (user_id, *latest)
    known = _PEOPLE.get(key)
    if len(_LATEST) >= _PEOPLE_KEPT:
        _LATEST.clear()
    _LATEST[user_id] = key
    if known is None:
        if len(_PEOPLE) >= _PEOPLE_KEPT:
            _PEOPLE.clear()
        turns = rt.semantic.turns.of_episodes(user_id, latest) if latest else []
        known = _PEOPLE[key] = (frozenset(t.name for t in turns if t.name), addressed_names(turns))
    return Found(speakers=set(known[0]), aliases=dict(known[1]))


def people_and_profile(rt: Services, user_id: str) -> tuple[Found, UserProfile]:
    """:func:`people` and the user's profile, their reads in one round trip (a context needs both)."""
    timeline = rt.keys.user(user_id).episode_timeline()

    def op(r: redis.Redis) -> list[Any]:
        pipe = r.pipeline(transaction=False)
        pipe.zrevrange(timeline, 0, SPEAKER_SESSIONS - 1)
        pipe.get(rt.profiles.key(user_id))
        return pipe.execute()

    latest, raw = rt.connector.run(op)
    return people(rt, user_id, members(latest)), rt.profiles.parse(user_id, raw)


def addressed_names(turns: list[StoredTurn]) -> dict[str, str]:
    """Names the speakers of two-person sessions call each other by ("Hey Kate!" said by Elise to
    Emi: ``{"Kate": "Emi"}``), at least :data:`ADDRESSED_MIN` times, other than their own names;
    each to the speaker it most often names."""
    by_episode: dict[str, set[str]] = {}
    for t in turns:
        if t.name:
            by_episode.setdefault(t.episode_id, set()).add(t.name)
    names = {n.lower() for n in set().union(*by_episode.values())} if by_episode else set()
    called: Counter[tuple[str, str]] = Counter()
    for t in turns:
        others = by_episode.get(t.episode_id, set()) - {t.name or ""}
        if not t.name or len(others) != 1:
            continue
        for m in _ADDRESSED.finditer(t.content):
            name = m["name"]
            if name.lower() not in names and named_speakers(name, [name]):  # capitalised, not "May"
                called[(name, next(iter(others)))] += 1
    out: dict[str, str] = {}
    for (name, speaker_name), count in called.most_common():
        if count >= ADDRESSED_MIN:
            out.setdefault(name, speaker_name)
    return out


#: (user, episode id) -> the ids of the memories of the episode's facts, as last read in this process
_FACT_MEMORIES: dict[tuple[str, str], tuple[str, ...]] = {}
_FACT_MEMORIES_KEPT = 20_000


def _known_fact_memories(user_id: str, asked: list[str], episode_ids: list[str]) -> list[str]:
    """The ids of the memories of the facts of those of ``episode_ids`` whose facts :data:`_FACT_MEMORIES`
    knows (a search's ``prefetch``; also left in ``asked``)."""
    asked[:] = [m for e in episode_ids for m in _FACT_MEMORIES.get((user_id, e), ())]
    return asked


#: (user, facts) -> their memory ids (:func:`_fact_memories`; a search reads ~10 episodes' facts)
_FACT_IDS: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}


def _fact_memories(user_id: str, episode: Episode) -> tuple[str, ...]:
    """The ids of the memories of the episode's facts (kept in :data:`_FACT_MEMORIES`)."""
    facts = (user_id, tuple(episode.facts))
    ids = _FACT_IDS.get(facts)
    if ids is None:
        ids = tuple(memory_id(user_id, fact) for fact in episode.facts)
        if len(_FACT_IDS) >= _FACT_MEMORIES_KEPT:
            _FACT_IDS.clear()
        _FACT_IDS[facts] = ids
    if len(_FACT_MEMORIES) >= _FACT_MEMORIES_KEPT:
        _FACT_MEMORIES.clear()
    _FACT_MEMORIES[(user_id, episode.id)] = ids
    return ids


#: the words a question names a changing attribute with (:data:`agtos.tasks.validity.ATTRIBUTES`): "Where do I
#: live now?" is about "User moved from Graz to Leeds", "What car do I have?" about "User bought a used Ford Fiesta"
ATTRIBUTE_WORDS = {
    "lives-in": ("live", "living", "city", "town", "country", "home", "neighbourhood", "neighborhood", "address"),
    "works-at": ("work", "job", "company", "employer", "firm"),
    "job": ("work", "job", "role", "profession"),
    "relationship": ("partner", "relationship", "married", "dating", "boyfriend", "girlfriend", "husband", "wife"),
    "diet": ("eat", "diet"),
    "car": ("car", "drive", "vehicle"),
}


def _names_attribute(query: str, fact: str) -> bool:
    """Whether ``query`` names an attribute ``fact`` states or ends (:data:`ATTRIBUTE_WORDS`)."""
    named = [w for c in claims_of(fact) if c.attribute for w in ATTRIBUTE_WORDS.get(c.attribute, ())]
    return bool(named) and about(query, " ".join(named))


def _asked_about(query: str, fact: str) -> bool:
    """Whether ``query`` is about ``fact``: a word in common (:func:`about`) or an attribute it names."""
    return about(query, fact) or _names_attribute(query, fact)


def current_fact_episodes(rt: Services, user_id: str, query: str, asked: Collection[str] = ()) -> list[str]:
    """For a question about now ("Where do I work now?": :func:`recency_weight`) that names an
    attribute (:data:`ATTRIBUTE_WORDS`), the episodes where its value was last changed: the memories
    indexed under the attribute of the user (of the speakers ``asked``, when it names them) followed
    to the current facts that superseded them, newest first. A value never updated adds nothing (its
    session is found by its words; a later change that no fact recorded would be missed). Up to
    :data:`SUPERSEDED_HOPS` + 1 round trips."""
    if recency_weight(query) == RECENCY_WEIGHT:
        return []
    attributes = [a for a, named in ATTRIBUTE_WORDS.items() if about(query, " ".join(named))]
    if not attributes:
        return []
    slots = [f"{subject}|{attribute}" for subject in (sorted(asked) or ["user"]) for attribute in attributes]
    slot_ids = rt.semantic.history.slot_ids(user_id, slots)
    stated = [Memory.model_validate_json(raw) for raw in rt.semantic.records("memory", user_id, slot_ids).values()]
    # the facts that replaced an earlier value (not one never updated)
    later = {m.superseded_by: 0.0 for m in stated if m.superseded_by}
    current = _replacements(rt, user_id, later, {m.id for m in stated}, SUPERSEDED_HOPS)
    newest = sorted((m for m, _ in current), key=lambda m: -m.valid_from)
    return list(dict.fromkeys(m.source_episode_ids[-1] for m in newest if m.source_episode_ids))


def prefer_current_episodes(
    rt: Services,
    user_id: str,
    query: str,
    hits: list[SearchHit],
    read: Mapping[str, str] | None = None,
    asked: Collection[str] = (),
) -> list[SearchHit]:
    """An episode holding a fact the question is about, which a later episode superseded, goes just
    below that episode; the later episode, when not among the hits, is read and takes its place when
    the question names the attribute that changed (:data:`ATTRIBUTE_WORDS`). Not for a question about
    the past (:func:`asks_what_happened`).
    ``read``: memory records already read for the ids ``asked``, with the memories that superseded
    them (a search's ``prefetch``); the others are read here (one round trip)."""
    if not hits or asks_what_happened(query):
        return hits
    source = {i: h.episode.id for h in hits for i in _fact_memories(user_id, h.episode)}
    missing = [i for i in source if i not in asked]
    raws = dict(read or {}) | rt.semantic.store("memory").get_linked(user_id, missing, "superseded_by")
    found = {i: Memory.model_validate_json(raws[i]) for i in source if i in raws}
    newer = [m.superseded_by for m in found.values() if m.superseded_by and m.superseded_by not in found]
    found |= {i: Memory.model_validate_json(raws[i]) for i in dict.fromkeys(newer) if i in raws}
    listed = {h.episode.id for h in hits}
    replaced: dict[str, str] = {}
    for mid, memory in found.items():
        later = found.get(memory.superseded_by or "")
        if mid not in source or later is None:
            continue
        if not (_asked_about(query, memory.text) or _asked_about(query, later.text)):
            continue
        others = [e for e in later.source_episode_ids if e != source[mid]]
        # read in when not listed only for a question naming what changed ("what car", not "the blog's traffic")
        read_in = others[0] if others and _names_attribute(query, memory.text) else None
        episode = next((e for e in others if e in listed), read_in)
        if episode is not None:
            replaced.setdefault(source[mid], episode)
    by_id = {h.episode.id: h for h in hits}
    unlisted = sorted({e for e in replaced.values() if e not in listed})
    for episode_id, raw in (rt.semantic.records("episode", user_id, unlisted) if unlisted else {}).items():
        old = next(by_id[o] for o, e in replaced.items() if e == episode_id)
        by_id[episode_id] = SearchHit(Episode.model_validate_json(raw), old.score, old.match_type)
    order: list[str] = []
    for hit in hits:  # a later episode read here goes just above the first hit it replaces
        newer_ids = [e for o, e in replaced.items() if o == hit.episode.id and e in by_id and e not in listed]
        order += [e for e in newer_ids if e not in order]
        order.append(hit.episode.id)
    return [by_id[i] for i in after_replacements(order, replaced)]


def prefer_current(
    rt: Services, user_id: str, memories: list[tuple[Memory, float]], hops: int = 3
) -> list[tuple[Memory, float]]:
    """Memories best first with current facts preferred: a superseded one counts
    :data:`SUPERSEDED_WEIGHT` of its score, and the current fact that replaced it (following up to
    ``hops`` replacements) joins with its full score."""
    have = {m.id for m, _ in memories}
    wanted = {m.superseded_by: s for m, s in memories if m.superseded_by and m.superseded_by not in have}
    replacements = _replacements(rt, user_id, wanted, have, hops)
    scored = [(m, s if m.current else s * SUPERSEDED_WEIGHT) for m, s in memories] + replacements
    return sorted(scored, key=lambda pair: -pair[1])


def _replacements(
    rt: Services, user_id: str, wanted: dict[str, float], have: set[str], hops: int
) -> list[tuple[Memory, float]]:
    """The current facts reached from the memory ids ``wanted`` (each with the score it carries) by
    following up to ``hops`` replacements (``superseded_by``), one round trip a hop; ``have``: the ids
    read already (updated), not followed again."""
    replacements: list[tuple[Memory, float]] = []
    for _ in range(hops):
        following: dict[str, float] = {}
        for raw in rt.semantic.records("memory", user_id, list(wanted)).values():
            memory = Memory.model_validate_json(raw)
            have.add(memory.id)
            if memory.current:
                replacements.append((memory, wanted[memory.id]))
            elif memory.superseded_by and memory.superseded_by not in have:
                following[memory.superseded_by] = wanted[memory.id]
        wanted = following
    return replacements


def _key(turn: StoredTurn) -> str:
    return turn_doc_id(turn.episode_id, turn.position)


def _with_dated(found: list[TurnMatch], dated: list[TurnMatch]) -> list[TurnMatch]:
    """The index's turn hits and the turns of the days the query names, by weighted RRF (scores 0-1)."""
    if not dated:
        return found
    # the day's list first: on equal scores the turn said that day wins
    lists = [[_key(m.turn) for m in dated], [_key(m.turn) for m in found]]
    fused = reciprocal_rank_fusion(lists, weights=[DATED_WEIGHT, 1.0])
    by_key = {_key(m.turn): m for m in dated} | {_key(m.turn): m for m in found}
    top = max_fused_score([1.0, DATED_WEIGHT])
    return [replace(by_key[k], score=round(min(1.0, score / top), 4)) for k, score in fused]


def dated_turns(rt: Services, user_id: str, query: str, days: list[date], neighbours: int = 0) -> list[TurnMatch]:
    """The turns of the sessions held on a day ``query`` names ("on 5 Jan 2024"), and turns that name
    that day ("yesterday [= 5 January 2024]") in the sessions of the two days after, best BM25 match
    with the query first (then in the order said), at most :data:`DATED_TURNS`."""
    episode_ids: list[str] = []
    for day in days[:3]:
        start = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)
        episode_ids += rt.episodes.ids_between(user_id, start, start + 3 * _DAY_MS, DATED_EPISODES)
    by_episode: dict[str, list[StoredTurn]] = {}
    for turn in rt.semantic.turns.of_episodes(user_id, list(dict.fromkeys(episode_ids))):
        by_episode.setdefault(turn.episode_id, []).append(turn)
    wanted = {d.isoformat() for d in days}
    picked: list[StoredTurn] = []
    for turns in by_episode.values():
        held = any(turn_datetime(t.timestamp, t.utc_offset).date().isoformat() in wanted for t in turns)
        picked += [t for t in turns if held or any(d.date in wanted for d in t.dates)]
    texts = {_key(t): format_turn(t) for t in picked}
    scores = dict(rank_texts(query, texts, len(texts)))
    ranked = sorted(picked, key=lambda t: -scores.get(_key(t), 0.0))[:DATED_TURNS]
    return [
        TurnMatch(
            t,
            0.0,
            (_key(t),),
            tuple(by_episode[t.episode_id][max(0, t.position - neighbours) : t.position]),
            tuple(by_episode[t.episode_id][t.position + 1 : t.position + 1 + neighbours]),
        )
        for t in ranked
    ]


def search(
    rt: Services, user_id: str, query: str, limit: int = 10, mode: str | None = None
) -> tuple[list[SearchHit], str | None]:
    """Episodes by hybrid (default), vector or BM25 search, best first, each ranked by its best
    evidence (a turn that matched, its summary, a memory drawn from it) and shown with the turns
    that matched; recency only breaks near ties (see ``rerank_by_recency``). With them, why the
    search was degraded (``None`` when it ran as asked)."""
    found = recall(rt, user_id, query, limit, mode, memories=limit * FACTS_PER_HIT, shown=limit)
    return found.episodes[:limit], found.degraded


def search_episodes(
    rt: Services, user_id: str, query: str, limit: int = 10, mode: str | None = None
) -> list[SearchHit]:
    """The episodes of :func:`search`."""
    return search(rt, user_id, query, limit, mode)[0]


def search_memories(rt: Services, user_id: str, query: str, limit: int = 10, mode: str | None = None) -> list[Memory]:
    """Semantic memories (facts, preferences) relevant to ``query``, best first."""
    found = rt.semantic.search("memory", user_id, query, limit, mode)
    return [Memory.model_validate_json(r.payload) for r in found.results if r.payload is not None]


def profile_items(
    rt: Services,
    user_id: str,
    query: str,
    most: int | None = PROFILE_LINES,
    who: Found | None = None,
    profile: UserProfile | None = None,
) -> list[ContextItem]:
    """The profile's lines that share a content word with ``query`` other than the name of a person
    who speaks (at most ``most``, those sharing most words first); ``most=None``: every line, the
    relevant ones at 0.9, others 0.5. ``who``, ``profile``: already read for this request."""
    profile = rt.profiles.get(user_id) if profile is None else profile
    query_terms = set(content_words(without_speakers(query, (who or people(rt, user_id)).names)))
    lines = [f"User's name is {profile.name}"] if profile.name else []
    if profile.communication_style:
        lines.append(f"Communication style: {profile.communication_style}")
    lines += profile.preferences + profile.patterns + profile.facts
    shared = [len(query_terms & set(content_words(line))) for line in lines]
    items = [
        ContextItem("profile", f"profile-{i}", line, 0.9 if shared[i] else 0.5, profile.updated_at)
        for i, line in enumerate(lines)
    ]
    if most is None:
        return items
    relevant = sorted((i for i in range(len(lines)) if shared[i]), key=lambda i: -shared[i])
    return [items[i] for i in relevant[:most]]


def build_context(
    rt: Services, user_id: str, query: str, wm: WorkingMemory | None, budget_tokens: int, limit: int
) -> dict[str, Any]:
    """The ``/api/memory/context`` section for ``query``: see :mod:`agtos.memory.context_builder`."""
    from agtos.memory import context_builder  # it builds on this module

    return context_builder.build_context(rt, user_id, query, wm, budget_tokens, limit)


def ask(rt: Services, user_id: str, question: str, limit: int = 5) -> dict[str, Any]:
    """Dialectic: answer a question about the user from profile, conclusions, memories, turns, episodes."""
    evidence = [Evidence(i.id, "profile", i.text, i.relevance) for i in profile_items(rt, user_id, question)]
    found = recall(rt, user_id, question, limit, memories=limit, conclusions=limit)
    evidence += [Evidence(c.id, "conclusion", c.text, s) for c, s in found.conclusions]
    evidence += [Evidence(m.id, "memory", m.text, s) for m, s in found.memories]
    evidence += [
        Evidence(parse_id(m), "turn", attributed(m.turn, annotate(m.turn.content, m.turn.dates)), m.score)
        for m in found.turns[:limit]
    ]
    evidence += [Evidence(h.episode.id, "episode", h.episode.summary, h.score) for h in found.episodes[:limit]]
    # the best sentence(s) of the evidence, or "I don't know" below the relevance floor (tasks/answer_builder);
    # when the embedder just failed this question's search, by word overlap alone: a second call would
    # wait on a service that does not answer. Else a remote embedder is waited on at most the request
    # bound, not its batch timeout (30 s): a repeated question's vector comes from the query cache, so
    # its search does not find a silent embedder out; scoring then falls back to word overlap too
    degraded = found.degraded
    wait_s = rt.settings.embedding.request_timeout_s

    def embed(texts: list[str]) -> np.ndarray | None:
        nonlocal degraded
        vectors = rt.semantic.embed_or_none(texts, wait_s)
        if vectors is None and texts:
            degraded = EMBEDDER_DOWN
        return vectors

    built = build_answer(question, evidence, None if found.degraded == EMBEDDER_DOWN else embed)
    source, answer = "extractive", built.text
    if rt.dialectic_llm is not None and built.answered:
        try:
            answer, source = llm_answer(rt.dialectic_llm, question, evidence), f"llm:{rt.dialectic_llm.name}"
        except LLMError:
            log.warning("dialectic LLM failed; answering extractively", exc_info=True)
    return {
        "question": question,
        "answer": answer,
        "answered": built.answered,
        "relevance": built.relevance,
        "citedIds": built.cited,
        "source": source,
        "evidence": evidence,
        "evidenceIds": list(dict.fromkeys(e.id for e in evidence)),
        "degraded": degraded,
    }


def parse_id(match: TurnMatch) -> str:
    """The index id of a matched turn (its first window's, for a long turn)."""
    place = parse_turn_doc_id(match.doc_ids[0])
    return match.doc_ids[0] if place is None else f"{place[0]}.t{place[1]}"
