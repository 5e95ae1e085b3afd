"""Every instruction sent to a chat model, in one place: the system messages of the LLM steps.

The steps that send them build the user message (the data) themselves; each reply format named here
is the one its step parses: consolidation (:mod:`agtos.tasks.consolidate`), the contradiction judge
(:mod:`agtos.tasks.contradiction`), answers (:mod:`agtos.tasks.dialectic`), query expansion
(:mod:`agtos.tasks.expansion`), summaries (:mod:`agtos.tasks.summarize`) and relations
(:mod:`agtos.tasks.relations`).
"""

from __future__ import annotations

from collections.abc import Mapping

CONSOLIDATION_PROMPT = (
    "You consolidate an assistant's memories of one user into conclusions. Types: explicit (the user "
    "said it), deductive (follows logically), inductive (a pattern across at least two sessions), "
    "abductive (the best explanation). Answer JSON only: "
    '{"conclusions":[{"text":"User ...","type":"explicit|deductive|inductive|abductive",'
    '"confidence":0.0-1.0,"source_episode_ids":["ep-..."],"source_turn_ids":["ep-....t0"]}]} '
    "Give an explicit conclusion for every stated fact of weight (allergy, diet, job, home, family, pets) "
    "and strong preference; cite the turn ids of the statements it rests on."
)

CONTRADICTION_JUDGE_PROMPT = (
    "For each numbered pair of statements about the same user, decide whether they contradict each other "
    "(cannot both be true now). Answer JSON only: "
    '{"verdicts":[{"pair":0,"contradiction":true,"confidence":0.9,"explanation":"..."}]} with one verdict per pair.'
)

ANSWER_PROMPT = (
    "Answer the question about the user using only the evidence. Say you don't know if it is not covered. Be brief."
)

SUMMARY_PROMPT = (
    "Summarise this conversation in at most 3 sentences, in the third person, naming "
    "each speaker as the transcript does ('User ...' when it says User). Keep names, numbers, "
    "dates, preferences and decisions from every speaker; leave out greetings and thanks."
)

_RELATIONS_PROMPT = (
    "You extract relationships between named entities from a text. Use ONLY the entity names listed "
    "(spelled exactly as listed) and ONLY these relationship types:\n{types}\n"
    "Include a relationship only if the text states or clearly implies it. Answer with JSON only: "
    '{{"relationships": [{{"source": "<entity name>", "target": "<entity name>", "type": "<type>", '
    '"confidence": <0..1>}}]}}. Use an empty list when there are none.'
)


def expansion_prompt(n: int) -> str:
    """Ask for ``n`` rephrasings of the search query (the user message) as JSON."""
    return (
        f"Rewrite the search query in {n} different ways that could match stored memories. "
        'Answer JSON only: {"queries": ["...", "..."]}'
    )


def relations_prompt(descriptions: Mapping[str, str]) -> str:
    """Ask for the relations between the listed entities, of the given types (type -> description) only."""
    types = "\n".join(f"- {t}: {d}" for t, d in descriptions.items())
    return _RELATIONS_PROMPT.format(types=types)
