"""Who said what: speaker names and which speakers are people, from a session's turns.

A conversation names its speakers through ``Turn.name`` or a ``"Name: "`` prefix on the content
(how chat logs are often pasted and how LoCoMo-style sets are sent). A prefix counts as a name
only when it is not a common label ("Note:", "Summary:") and recurs on the turns of its role (or
heads the role's only turn), so "Update: …" once in a long chat stays content.

People: every ``user`` turn; an ``assistant`` turn when the conversation names both sides (a chat
between two people sent as user/assistant); never tool, system or summary turns.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from agtos.schemas import Role, Turn

_PREFIX = re.compile(r"^\s*([A-Za-z][\w'’.-]{0,40}(?: [A-Z][\w'’.-]{0,40}){0,2}):\s+(?=\S)")
_LABELS = frozenset(
    """note notes summary update edit todo fyi ps p.s re subject question answer q a error warning
    info tip hint reminder important example input output context task result status user assistant
    system tool human ai bot agent me you step caution title description reason noted done sure ok okay
    yes no thanks hint source quote translation
    """.split()
)
#: words that head a line like a speaker's name but are labels ("Note: ...")
SPEAKER_LABELS = _LABELS


@dataclass(frozen=True, slots=True)
class Utterance:
    """One turn seen as speech: who (``speaker``: display name, or None), whether a person, what."""

    turn: Turn
    speaker: str | None
    text: str
    human: bool

    @property
    def label(self) -> str:
        """The name a summary line is attributed to: the speaker, else the role ("User")."""
        if self.turn.is_summary:
            return "Summary"
        return self.speaker or str(self.turn.role).capitalize()


def display_name(name: str) -> str:
    """'elise' -> 'Elise'; a name with capitals is kept as written."""
    name = " ".join(name.split())
    return name[:1].upper() + name[1:] if name.islower() else name


def _prefix(content: str) -> str | None:
    m = _PREFIX.match(content)
    return m.group(1) if m and m.group(1).lower() not in _LABELS else None


def _prefix_names(turns: list[Turn]) -> dict[str, frozenset[str]]:
    """Per role, the prefixes that recur on its turns; a role's only turn counts too when every
    user/assistant turn of the conversation carries a prefix ("Gina: Hey!" / "Jon: Hi!")."""
    by_role: dict[str, Counter[str]] = {}
    totals: Counter[str] = Counter()
    for turn in turns:
        if turn.is_summary or turn.role not in (Role.user.value, Role.assistant.value):
            continue
        totals[turn.role] += 1
        if (p := _prefix(turn.content)) is not None:
            by_role.setdefault(turn.role, Counter())[p] += 1
    all_prefixed = sum(totals.values()) >= 2 and all(sum(by_role.get(r, {}).values()) == n for r, n in totals.items())
    return {
        role: frozenset(p for p, n in counts.items() if n >= 2 or (all_prefixed and totals[role] == 1))
        for role, counts in by_role.items()
    }


def utterances(turns: list[Turn]) -> list[Utterance]:
    """Every turn with its speaker's display name (prefix stripped from the text) and humanity."""
    names = _prefix_names(turns)
    resolved: list[tuple[Turn, str | None, str]] = []
    for turn in turns:
        speaker, text = None, turn.content.strip()
        if turn.role in (Role.user.value, Role.assistant.value) and not turn.is_summary:
            p, match = _prefix(text), _PREFIX.match(text)
            if p is not None and match is not None and p in names.get(turn.role, ()):
                speaker, text = p, text[match.end() :]
            if turn.name and turn.name.strip():
                speaker = turn.name
        resolved.append((turn, display_name(speaker) if speaker else None, text))
    user_named = any(s for t, s, _ in resolved if t.role == Role.user.value)
    return [
        Utterance(
            turn,
            speaker,
            text,
            not turn.is_summary
            and (turn.role == Role.user.value or (turn.role == Role.assistant.value and user_named and bool(speaker))),
        )
        for turn, speaker, text in resolved
    ]


def human_names(said: list[Utterance]) -> list[str]:
    """The distinct named people of a conversation, in order of first appearance."""
    return list(dict.fromkeys(u.speaker for u in said if u.human and u.speaker))
