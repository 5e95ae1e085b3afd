"""How long a request waits for a user's writers' lock before it answers 503 (``agtos.storage.user_lock``).

The routes that change memories, entities, conclusions or the profile, and take their first such lock
before they write anything, run their work within :func:`first_lock_bounded`: when another writer
(a session end's merge, the lint, a Dreamer run, another API process, or a holder that died) keeps the
user's lock for :data:`REQUEST_LOCK_WAIT_S`, the request answers 503 with ``Retry-After`` (the seconds
until that lock expires at the latest) and writes nothing, well within a client's timeout (30 s for
``agtos.client``, which retries a 503 after its ``Retry-After``), instead of waiting out the lock's
60 s expiry and then writing beside a holder that still has it. Session ends and an episode's
``/forget`` write before their first lock and keep the whole wait (while live holders keep the lock: up to
``AGTOS_LOCK_WAIT_MAX_S``, then 503 as well: ``LockWaitTooLong`` is a ``LockBusy``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from agtos.storage.user_lock import waiting_at_most

#: seconds a request waits for its first lock (a holder keeps it for milliseconds as a rule)
REQUEST_LOCK_WAIT_S = 10.0


def first_lock_bounded() -> AbstractContextManager[None]:
    """The request's first lock waited for at most :data:`REQUEST_LOCK_WAIT_S` (then ``LockBusy``: 503)."""
    return waiting_at_most(REQUEST_LOCK_WAIT_S)
