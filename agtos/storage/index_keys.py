"""Key naming of the per-user search indexes (BM25 and vector).

Every index key is ``{prefix}:u:{user}:{namespace}:_idx:{part}``, built with
:meth:`UserKeys.collection`. Index key names always contain a ``:`` after
``_idx``, and record ids cannot contain ``:``, so an index key can never equal a
record key ``{prefix}:u:{user}:{namespace}:{record_id}``; all index keys are
still under the user's ``all_pattern()`` so deleting a user removes them.
"""

from __future__ import annotations

from agtos.storage.keys import GlobalKeys, check_record_id


def check_namespace(namespace: str) -> str:
    """Namespaces ("episode", "memory", "conclusion"...) follow the record id alphabet."""
    return check_record_id(namespace, "index namespace")


def index_key(keys: GlobalKeys, user_id: str, namespace: str, part: str) -> str:
    """The key of one part of one user's index in ``namespace`` (e.g. ``bm25:len``)."""
    return keys.user(user_id).collection(namespace, f"idx:{part}")
