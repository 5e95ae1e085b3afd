"""Query-as-Ingest scoring: how much an agent response is worth remembering.

=====================================  ======
factor                                 points
=====================================  ======
baseline                               4
tool calls (one or more)               +3
two or more reasoning steps            +2
length > 1000 chars (else > 500)       +2 (+1)
a synthesis phrase (counted once)      +1
=====================================  ======

Reasoning steps are the explicit ``reasoning_steps`` count when the caller has one;
otherwise the larger of (a) numbered or bulleted list lines (``1.``, ``2)``, ``Step 3:``,
``-``, ``*``, ``•``) and (b) sequence markers opening a sentence or line (``First``,
``Second``, ``Then``, ``Next``, ``After that``, ``Finally``, ``Lastly``...).
"""

from __future__ import annotations

import re

from pydantic import ConfigDict

from agtos.schemas.api import ApiModel, ScoreFactorOut

BASELINE = 4
TOOL_CALL_POINTS = 3
REASONING_POINTS = 2
MIN_REASONING_STEPS = 2
LONG_CHARS, LONG_POINTS = 1000, 2
MEDIUM_CHARS, MEDIUM_POINTS = 500, 1
SYNTHESIS_POINTS = 1

SYNTHESIS_PATTERNS: tuple[str, ...] = (
    r"compared (?:to|with)",
    r"in comparison",
    r"trade-?offs?",
    r"trade offs?",
    r"analysis (?:shows|suggests|indicates)",
    r"in summary",
    r"to summari[sz]e",
    r"in conclusion",
    r"on balance",
    r"pros and cons",
    r"taken together",
)
_SYNTHESIS = re.compile(r"\b(?:" + "|".join(SYNTHESIS_PATTERNS) + r")\b", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,3}[.)]|step\s+\d{1,3}\s*[:.)-]|[-*•])\s+\S", re.IGNORECASE | re.MULTILINE)
_MARKER = re.compile(
    r"(?:^|[.!?;:]\s+|\n\s*)"
    r"(first(?:ly)?|second(?:ly)?|third(?:ly)?|then|next|after\s+that|afterwards|finally|lastly)\b",
    re.IGNORECASE,
)


#: One row of the table that applied: its name and points.
ScoreFactor = ScoreFactorOut


class ResponseScore(ApiModel):
    """The total and the factors that made it up (baseline included); camelCase on the wire."""

    model_config = ConfigDict(frozen=True)

    score: int
    factors: tuple[ScoreFactor, ...]
    reasoning_steps: int

    @property
    def factor_names(self) -> list[str]:
        return [f.name for f in self.factors]


def count_reasoning_steps(text: str) -> int:
    """Steps found in ``text``: max(list lines, sequence markers)."""
    return max(len(_LIST_ITEM.findall(text)), len(_MARKER.findall(text)))


def score_response(text: str, *, tool_calls: int = 0, reasoning_steps: int | None = None) -> ResponseScore:
    """Score an agent response with the module's table (4 to 12)."""
    steps = count_reasoning_steps(text) if reasoning_steps is None else max(0, reasoning_steps)
    factors = [ScoreFactor(name="baseline", points=BASELINE)]
    if tool_calls > 0:
        factors.append(ScoreFactor(name="tool-calls", points=TOOL_CALL_POINTS))
    if steps >= MIN_REASONING_STEPS:
        factors.append(ScoreFactor(name="reasoning-steps", points=REASONING_POINTS))
    length = len(text.strip())
    if length > LONG_CHARS:
        factors.append(ScoreFactor(name="length>1000", points=LONG_POINTS))
    elif length > MEDIUM_CHARS:
        factors.append(ScoreFactor(name="length>500", points=MEDIUM_POINTS))
    if _SYNTHESIS.search(text):
        factors.append(ScoreFactor(name="synthesis", points=SYNTHESIS_POINTS))
    return ResponseScore(score=sum(f.points for f in factors), factors=tuple(factors), reasoning_steps=steps)
