"""Context assembly (pure): candidates from every tier → priority → dedup → token budget → prompt section.

Candidates are ranked within their tier by relevance and across tiers by weighted reciprocal
rank (:data:`TIER_WEIGHTS`), so the budget goes to the best evidence of each kind in turn and a
relevant old line is never pushed out by its age. Each matched turn is one line; its neighbours
are candidates of their own, weighted lower (``neighbour``), so the best evidence comes with its
context and the rest of the budget still reaches further evidence; a line is paid for once. A
fact whose words a chosen line already holds is left out. Every line but the profile's and this
session's is dated (turn lines by one heading per day, paid for once: a date repeated on every line
cost a fifth of the budget), every turn line names its speaker; ``tokens`` counts the section as
rendered.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from functools import lru_cache

from agtos.schemas import StoredTurn
from agtos.schemas.records import local_time_in_range
from agtos.tasks.bm25 import query_terms
from agtos.tasks.dates import annotate, attributed, format_day, turn_datetime, turn_prefix
from agtos.tasks.text import content_words, normalise
from agtos.tasks.tokens import count_tokens, load_tokenizer
from agtos.tasks.validity import until_label
from agtos.tasks.verbatim_turns import turn_units

SECTION_TITLES = {
    "profile": "About the user",
    "semantic": "Known facts and preferences",
    "conclusion": "Conclusions",
    "turn": "From past conversations",
    "episodic": "Relevant past sessions",
    "working": "Earlier in this conversation",
}
SECTION_ORDER = tuple(SECTION_TITLES)
HEADER = ("## Memory", "Use these memories about the user when relevant; they may be outdated.")
#: how a tier's rank-r item competes for the budget: weight / (PRIORITY_K + r)
TIER_WEIGHTS = {
    "working": 2.0,
    "turn": 1.0,
    "semantic": 0.6,
    "profile": 0.5,
    "conclusion": 0.5,
    "neighbour": 0.4,
    "episodic": 0.3,
}
PRIORITY_K = 10
NEAR_DUPLICATE_JACCARD = 0.8
CONTAINED = 0.9  # a fact whose content words a chosen line holds (this share of them) is said already
#: tiers whose text restates what the session's turns said (an episode summary is sentences of its own
#: turns): a sentence of it whose content words the chosen lines together hold (CONTAINED) is left out
RESTATING = frozenset({"episodic"})
TURN_TOKENS = 200  # a long matched turn is cut to this many tokens around what matched
NEIGHBOUR_TOKENS = 60  # a neighbour turn is cut to its first tokens
UNDATED = ("profile", "working")
DAY_MS = 86_400_000
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|\n|$)")
_WORD = re.compile(r"\w+")
_LABEL = re.compile(r"([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,3}): ")  # a summary's "Gina: " or "User: "


def day_heading(day: str) -> str:
    """The line that dates the turn lines said that day, written once: ``8 May 2023:``."""
    return f"{day}:"


@lru_cache(maxsize=4096)
def _day(number: int) -> str:
    """Day ``number`` since the epoch as written (UTC); a context writes the same few days on many lines."""
    return format_day(turn_datetime(number * DAY_MS).date())


@dataclass(frozen=True)
class ContextItem:
    tier: str  # working | profile | semantic | conclusion | turn | episodic
    id: str
    text: str
    relevance: float  # 0-1, comparable within a tier
    timestamp: int  # ms
    episode_id: str | None = None
    session_id: str | None = None
    position: int | None = None  # a turn's place in its session
    neighbour: bool = False  # a turn next to a matched one, there for its context
    until: int | None = None  # a superseded fact: when a later one replaced it (ms)
    utc_offset: int | None = None  # a turn sent with a UTC offset: minutes east of UTC where it was said
    until_offset: int | None = None  # the UTC offset where the fact that superseded it was said

    @property
    def day(self) -> str:
        """The day it was said or held, as written: ``8 May 2023`` (UTC, or the turn's local day where
        that is a date: not past year 9999, see :func:`~agtos.tasks.dates.turn_datetime`)."""
        local = self.timestamp + 60_000 * (self.utc_offset or 0)
        return _day((local if local_time_in_range(self.timestamp, self.utc_offset) else self.timestamp) // DAY_MS)

    @property
    def bullet(self) -> str:
        """The line as written in the section: dated, or (a turn line, attributed already) under its
        day's heading (:func:`day_heading`); a superseded fact says until when it held."""
        if self.tier in UNDATED or self.tier == "turn":
            return f"- {self.text}"
        until = f" ({until_label(self.until, self.until_offset)})" if self.until is not None else ""
        return f"- ({self.day}) {self.text}{until}"

    @property
    def weight(self) -> float:
        return TIER_WEIGHTS["neighbour" if self.neighbour else self.tier] if self.tier in TIER_WEIGHTS else 0.3


def clip(text: str, max_tokens: int, around: int = 0) -> str:
    """``text`` cut to ``max_tokens`` tokens (``…`` marks a cut), the window holding character
    ``around`` (the start by default)."""
    if not around:  # the first tokens: read from a prefix of the text, not the whole of it
        if count_tokens(text) <= max_tokens:
            return text
        head = _leading_offsets(text, max_tokens)
        return text[head[0][0] : head[max_tokens - 1][1]] + "…"
    offsets = load_tokenizer().encode(text, add_special_tokens=False).offsets
    if len(offsets) <= max_tokens:
        return text
    at = next((i for i, (_, e) in enumerate(offsets) if e > around), 0)
    first = max(0, min(at - max_tokens // 4, len(offsets) - max_tokens))
    last = first + max_tokens - 1
    body = text[offsets[first][0] : offsets[last][1]]
    return ("…" if first else "") + body + ("…" if last < len(offsets) - 1 else "")


def _leading_offsets(text: str, count: int) -> list[tuple[int, int]]:
    """The character offsets of the first ``count`` tokens of ``text`` (all, when it has fewer):
    those of a prefix ending at a space, which no token spans (the tokenizer splits words at
    whitespace, each word on its own), so its tokens begin the text's."""
    tokenizer = load_tokenizer()
    size = 5 * count  # characters: most English tokens are longer
    while (cut := text.find(" ", size)) > 0:
        offsets = tokenizer.encode(text[:cut], add_special_tokens=False).offsets
        if len(offsets) >= count:
            return offsets[:count]
        size = 2 * cut
    return tokenizer.encode(text, add_special_tokens=False).offsets[:count]


def focus(text: str, terms: AbstractSet[str], max_tokens: int, around: int = 0, fill: bool = False) -> str:
    """A long ``text`` cut to ``max_tokens`` tokens by keeping its sentences that share most
    query ``terms`` (in their order, ``…`` between), else the window around character ``around``.
    ``fill``: the tokens those sentences leave go to the sentences next to them (:func:`_fill`)."""
    if count_tokens(text) <= max_tokens:
        return text
    spans = [(m.start(), m.end()) for m in _SENTENCE.finditer(text)]
    shared = [len(terms & _term_set(text[a:b])) for a, b in spans]
    if not terms or not any(shared):
        return clip(text, max_tokens, around)
    picked: list[int] = []
    used = 0
    for i in sorted(range(len(spans)), key=lambda i: (-shared[i], i)):
        cost = count_tokens(text[spans[i][0] : spans[i][1]]) + 1
        if shared[i] and used + cost <= max_tokens:
            picked.append(i)
            used += cost
    if not picked:
        start, end = spans[max(range(len(spans)), key=lambda i: shared[i])]
        window = clip(text, max_tokens, start)
        at, held = _densest(text, start, end, terms, 3 * max_tokens)
        if len(_term_set(window) & terms) >= held:
            return window
        return clip(text, max_tokens, at)  # a long sentence (unpunctuated text): where its terms are
    if fill:
        picked = _fill(text, spans, picked, max_tokens - used)
    out = []
    for n, i in enumerate(sorted(picked)):
        if i > 0 and (n == 0 or sorted(picked)[n - 1] != i - 1):
            out.append("…")
        out.append(text[spans[i][0] : spans[i][1]].strip())
    return " ".join(out) + (" …" if sorted(picked)[-1] < len(spans) - 1 else "")


def _fill(text: str, spans: Sequence[tuple[int, int]], picked: list[int], room: int) -> list[int]:
    """``picked`` sentences and, after each picked one that introduces what follows (ends with a colon:
    "Here are some hotels in Porto:"), the sentences that follow it while ``room`` tokens last: a long
    reply's matched heading brings the list under it rather than standing alone."""
    chosen = set(picked)
    for p in sorted(picked):
        if not text[spans[p][0] : spans[p][1]].rstrip().endswith(":"):
            continue
        for i in range(p + 1, len(spans)):
            if i in chosen:
                continue
            cost = count_tokens(text[spans[i][0] : spans[i][1]]) + 1
            if cost > room:
                break
            chosen.add(i)
            room -= cost
    return sorted(chosen)


def _densest(text: str, start: int, end: int, terms: AbstractSet[str], width: int) -> tuple[int, int]:
    """Where in ``text[start:end]`` the most distinct query ``terms`` occur within ``width`` characters,
    and how many."""
    found = [(m.start(), t) for m in _WORD.finditer(text, start, end) for t in _term_set(m.group()) & terms]
    best, at = 0, start
    inside: Counter[str] = Counter()  # the terms of the hits from this one to j (a sliding window: linear time)
    j = 0
    for position, term in found:
        while j < len(found) and found[j][0] < position + width:
            inside[found[j][1]] += 1
            j += 1
        if len(inside) > best:
            best, at = len(inside), position
        inside[term] -= 1
        if not inside[term]:
            del inside[term]
    return at, best


def chunk_offset(turn: StoredTurn, chunk: int) -> int:
    """Where window ``chunk`` of a long turn's index units starts in its annotated text."""
    if chunk <= 0:
        return 0
    units = turn_units([turn])
    if chunk >= len(units):
        return 0
    return max(0, annotate(turn.content, turn.dates).find(units[chunk].text[len(turn_prefix(turn)) :]))


def turn_items(
    window: Sequence[StoredTurn],
    hit: StoredTurn,
    relevance: float,
    query: str = "",
    chunk: int = 0,
    hit_tokens: int = TURN_TOKENS,
) -> list[ContextItem]:
    """The matched turn ``hit`` as a context line (cut to ``hit_tokens``), and its neighbours in
    ``window`` as lines of lower weight, each dated and attributed; long turns keep the sentences that
    share words with ``query`` (the hit, when none does: its matched window ``chunk``)."""
    terms = _term_set(query)
    out = []
    for turn in window:
        matched = turn.position == hit.position
        body = annotate(turn.content, turn.dates)
        text = (
            focus(body, terms, hit_tokens, chunk_offset(turn, chunk), fill=True)
            if matched
            else focus(body, terms, NEIGHBOUR_TOKENS)
        )
        out.append(
            ContextItem(
                "turn",
                f"{turn.episode_id}.t{turn.position}",
                attributed(turn, text),
                relevance,
                turn.timestamp,
                turn.episode_id,
                turn.session_id or None,
                turn.position,
                neighbour=not matched,
                utc_offset=turn.utc_offset,
            )
        )
    return out


TERMS_MEMO_CHARS = 1_000  # texts up to this long have their terms memoised (4096 of them: 4 MB at most)


@lru_cache(maxsize=4096)
def _terms(text: str) -> frozenset[str]:
    return frozenset(query_terms(text))


def _term_set(text: str) -> frozenset[str]:
    """A query's (or a sentence's) terms as a set: a context asks for the query's once per matched
    turn, and for a long turn's sentences once per window that holds the turn."""
    return _terms(text) if len(text) <= TERMS_MEMO_CHARS else frozenset(query_terms(text))


def prioritise(items: Sequence[ContextItem]) -> list[ContextItem]:
    """Items by ``TIER_WEIGHTS[tier] / (PRIORITY_K + rank in the tier by relevance)``, best first
    (neighbour lines rank among themselves, by their matched turn's relevance)."""
    by_tier: dict[tuple[str, bool], list[ContextItem]] = {}
    for item in items:
        by_tier.setdefault((item.tier, item.neighbour), []).append(item)
    scored = []
    for group in by_tier.values():
        for rank, item in enumerate(sorted(group, key=lambda i: -i.relevance), start=1):
            scored.append((item.weight / (PRIORITY_K + rank), item))
    return [item for _, item in sorted(scored, key=lambda pair: -pair[0])]


def unsaid(text: str, said_words: AbstractSet[str]) -> str:
    """``text`` without the sentences whose content words ``said_words`` holds (``CONTAINED`` of them;
    a sentence without content words goes too), each sentence kept under its speaker: a summary names
    the speaker (``Gina: ``) only where it changes, so a kept sentence whose speaker's first sentence
    was left out is named again. Empty when every sentence is said already."""
    parts: list[str] = []
    label = written = None
    for sentence in _SENTENCE.findall(text):
        sentence = sentence.strip()
        if m := _LABEL.match(sentence):
            label, sentence = m.group(1), sentence[m.end() :]
        words = set(content_words(sentence))
        if not words or len(words & said_words) >= CONTAINED * len(words):
            continue
        parts.append(sentence if label == written or label is None else f"{label}: {sentence}")
        written = label
    return " ".join(parts)


def _said(terms: set[str], norm: str, kept: list[tuple[set[str], int]], kept_norms: set[str], threshold: float) -> bool:
    """Whether a text (its content words, normalised form) repeats or is contained in a kept one
    (``kept``: each kept line's content words and their number): the same words (``norm``), a
    Jaccard similarity ``|a & b| / |a | b|`` of at least ``threshold`` (``|a | b|`` worked out as
    ``|a| + |b| - |a & b|``: one set operation per kept line), or most of its words in a longer one."""
    if norm in kept_norms:
        return True
    n = len(terms)
    if not n:  # no words: neither similar nor contained
        return False
    least = CONTAINED * n
    for k_terms, k in kept:
        if not k:
            continue
        shared = len(terms & k_terms)
        if shared / (n + k - shared) >= threshold or (shared >= least and k > n):
            return True
    return False


@dataclass
class _Budget:
    limit: int
    used: int = 0

    def take(self, cost: int) -> bool:
        if self.used + cost > self.limit:
            return False
        self.used += cost
        return True


def fit_budget(items: list[ContextItem], budget_tokens: int) -> tuple[list[ContextItem], int]:
    """Greedy in the given order: each item that is new and still fits, the section's header and
    each title paid for once; a turn is taken once, any other text when no chosen line says it
    already. Returns the chosen items and the tokens of the section they make."""
    budget = _Budget(budget_tokens)
    header = sum(count_tokens(line) for line in HEADER)
    chosen: list[ContextItem] = []
    titled: set[str] = set()
    turns: set[str] = set()
    days: set[str] = set()  # the days whose heading is written
    said_lines: set[str] = set()
    kept: list[tuple[set[str], int]] = []  # each chosen line's content words, and how many
    kept_norms: set[str] = set()  # and its normalised form
    said_words: set[str] = set()  # every chosen line's content words together
    for item in items:
        opening = (0 if chosen else header) + (0 if item.tier in titled else count_tokens(_title(item.tier)))
        norm = normalise(item.text)
        terms: set[str] | None = None  # a turn line's words are read only once it is chosen
        if item.tier == "turn":
            day = item.day
            said = f"{day} {norm}"
            if item.id in turns or said in said_lines:  # taken, or the same words the same day by the same person
                continue
            opening += 0 if day in days else count_tokens(day_heading(day))
        else:
            if item.tier in RESTATING and said_words:  # only what the chosen lines do not say already
                text = unsaid(item.text, said_words)
                if not text:
                    continue
                if text != item.text:
                    item, norm = replace(item, text=text), normalise(text)
            terms = set(content_words(item.text))
            if _said(terms, norm, kept, kept_norms, NEAR_DUPLICATE_JACCARD):
                continue
        if not budget.take(opening + count_tokens(item.bullet)):
            continue
        if terms is None:  # a turn line
            turns.add(item.id)
            said_lines.add(said)
            days.add(day)
            terms = set(content_words(item.text))
        kept.append((terms, len(terms)))
        kept_norms.add(norm)
        said_words |= terms
        chosen.append(item)
        titled.add(item.tier)
    return chosen, budget.used


def _title(tier: str) -> str:
    return f"### {SECTION_TITLES.get(tier, tier)}"


def format_section(items: list[ContextItem]) -> str:
    """A markdown system-prompt section grouped by tier; turn lines in the order they were said."""
    if not items:
        return ""
    lines = list(HEADER)
    for tier in SECTION_ORDER:
        group = [i for i in items if i.tier == tier]
        if not group:
            continue
        lines.append(_title(tier))
        if tier == "turn":  # in the order they were said, under the heading of their day
            group = sorted(group, key=lambda i: (i.timestamp, i.episode_id or "", i.position or 0))
            for n, i in enumerate(group):
                if n == 0 or group[n - 1].day != i.day:
                    lines.append(day_heading(i.day))
                lines.append(i.bullet)
            continue
        lines += [i.bullet for i in group]
    return "\n".join(lines)


def assemble(items: list[ContextItem], budget_tokens: int) -> tuple[list[ContextItem], str, int]:
    """Prioritise, dedupe, fit and format; returns (chosen items, prompt text, its tokens)."""
    chosen, used = fit_budget(prioritise(items), budget_tokens)
    return chosen, format_section(chosen), used
