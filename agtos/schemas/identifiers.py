"""What a user id and a record id may be: the one definition that the storage keys check and the API documents.

The patterns are written so that Python's ``re``, pydantic's Rust regex and the ECMA-262 dialect of
JSON Schema read them alike (no look-around); the length is a separate bound (``maxLength``).
Neither alphabet holds ``:``, ``*``, ``?``, ``[``, ``]``, braces or whitespace, so an id never
changes a Redis key's shape or a SCAN pattern, and an id is never only dots ("." and ".." are path
segments).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

ID_MAX_LENGTH = 128
#: a session, memory, episode, conclusion, entity or run id: letters, digits, ``_ . -`` (not only dots)
RECORD_ID = r"^\.*[A-Za-z0-9_-][A-Za-z0-9_.-]*$"
#: a user id: the record id's alphabet and ``@`` (an e-mail address is a user id)
USER_ID = r"^\.*[A-Za-z0-9_@-][A-Za-z0-9_.@-]*$"

#: each pattern's rule in words, for the 400 / 422 that refuse an id
ID_RULES = {
    RECORD_ID: f"1-{ID_MAX_LENGTH} characters of letters, digits, '_', '.' or '-' (not only dots)",
    USER_ID: f"1-{ID_MAX_LENGTH} characters of letters, digits, '_', '.', '@' or '-' (and not only dots)",
}

RecordId = Annotated[str, Field(pattern=RECORD_ID, max_length=ID_MAX_LENGTH)]
