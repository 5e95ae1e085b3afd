"""One lock for every writer of a user's conclusions and of the profile lines derived from them.

The Dreamer's merge, an episode's forget (sources rewritten, conclusions only it supports deleted), the
lint's persist, a conclusion's delete, and each rebuild or PUT of the profile read, change and write the
same records. Each holds the user's :data:`MERGE_LOCK` lock named :data:`NAME` (a :class:`UserLock`,
across processes) from its read to its write, so none writes over what another wrote in between. No
holder calls another holder (the lock is not re-entrant: a nested acquire would wait out ``lock_ms``),
and the embedder, LLM and NLI calls are made outside it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from agtos.storage.user_lock import UserLock

if TYPE_CHECKING:
    from agtos.memory.services import Services

#: the kind of the per-user lock (the README's key ``<prefix>:u:{<user>}:dreaming:conclusions``)
MERGE_LOCK = "dreaming"
NAME = "conclusions"


def conclusions_held(rt: Services, user_id: str) -> AbstractContextManager[None]:
    """Hold the user's conclusions lock (waiting while another writer holds it)."""
    return UserLock(rt.connector, rt.keys, MERGE_LOCK).held(user_id, NAME)


def delete_conclusion(rt: Services, user_id: str, conclusion_id: str) -> bool:
    """Delete a conclusion and its index entries under the lock (a Dreamer merging it meanwhile wrote its
    record back after the delete: listed again, without its indexes); False if there was none."""
    with conclusions_held(rt, user_id):
        found = rt.conclusions.delete(user_id, conclusion_id)
    if found:  # cached verdicts are keyed by digests of its text paired with others
        rt.nli_cache.clear(user_id)
    return found
