"""What kills ``memory/memory_versions.py`` ``_supersede`` mutmut 18 (issue 20, helper m7; docs/testing.md
"The last three survivors"): a fact that ends a value closes the user's earlier fact naming it however many
other memories name the value, a fact with no claim (closed by owner and mention) included. Through HTTP,
real Redis, literals from the docstrings."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import user
from tests.test_mutants_m6 import NEWS, assert_closed_by

ENDS = {  # a long fact of the user's with no attribute of a known shape, and the later change that ends it
    "Dropbox": (
        "The user keeps the family photos in Dropbox, sorted into one folder per year since the wedding, with the "
        "scanned slides of the grandparents and the videos of the first steps of both children",
        "The user switched from Dropbox to Google Drive",
    ),
    "WordPress": (
        "The user's blog runs on WordPress, a cheap shared host with a dozen plugins for the gallery, the comment "
        "spam filter and the recipe cards that readers print for the weekend baking posts",
        "The user migrated the blog from WordPress to Ghost",
    ),
}


@pytest.mark.parametrize("others", [24, 60])
@pytest.mark.parametrize("name", list(ENDS))
def test_a_change_closes_the_users_fact_with_no_claim_however_many_other_facts_name_the_value(
    client: TestClient, coordinator: MemoryCoordinator, name: str, others: int
) -> None:
    """MemoryVersions._supersede (mutmut 18: the keyword pool of an ended value ``keyword_candidates(…, 5)`` ->
    ``6``, 20 -> 24 BM25 candidates, survived as it pointed at this bug): "The user switched from Dropbox to
    Google Drive" (a change of anything) ends the user's earlier fact naming Dropbox (_supersede: "close the
    facts that a later fact of the same subject ... ends"; supersedes: "migrated the blog from WordPress to
    Ghost" ends "blog runs on WordPress"), a fact of no known shape that no slot finds, only the value's
    keyword postings. Looked for among the 20 best BM25 matches of the value (or the mutant's 24), it stayed
    current behind 24 shorter facts naming Dropbox; behind 60, a pool of 60 misses it too (checked planted:
    the 60 cases fail, the 24 pass), so a larger fixed pool is no fix. The other facts naming the value (not
    the user's: their owner is the company) stay current."""
    fact, ending = ENDS[name]
    who = f"kai-{name}-{others}"
    stated = client.post("/api/memory/memories", json={"text": fact}, headers=user(who)).json()["memory"]
    texts = [text.format(name) for text in NEWS]
    named = [f"{name} item {n} is listed" for n in range(others - len(texts))]
    for text in [*texts, *named]:
        assert client.post("/api/memory/memories", json={"text": text}, headers=user(who)).status_code == 201
    pool = coordinator.services.semantic.store("memory").keyword_candidates(who, name.lower(), 6)
    assert stated["id"] not in {d for d, _ in pool}  # the case: past the keyword pool of 24
    assert_closed_by(client, who, stated["id"], ending, [*texts, *named])
