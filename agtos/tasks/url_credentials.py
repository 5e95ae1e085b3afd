"""Credentials in service URLs kept out of logs and error messages.

``mask_urls`` rewrites every ``scheme://user:password@host`` in a text to ``scheme://user:***@host``
(a user name alone, often a token, becomes ``***``); ``split_userinfo`` takes the credentials out of a
URL so an HTTP client sends them as Basic auth and never prints them (httpx logs and error messages
name the request URL); ``mask_logged_urls`` masks them in what a third-party client logs.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"
# scheme:// then the userinfo up to the last '@' before the host (no whitespace, quotes or path in it)
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<userinfo>[^\s/?#'\"<>]*)@")


def _masked(match: re.Match[str]) -> str:
    user, sep, _password = match["userinfo"].partition(":")
    return f"{match['scheme']}{user}:{MASK}@" if sep else f"{match['scheme']}{MASK}@"


def mask_urls(text: str) -> str:
    """``text`` with the userinfo of each URL in it masked (``http://u:***@h:1/p``); the rest unchanged."""
    return _USERINFO.sub(_masked, text)


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its userinfo, and the (percent-decoded) user and password it held, if any."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), (unquote(user), unquote(password))


class _MaskedRecords(logging.Filter):
    """Rewrites a record whose message holds URL credentials to the masked message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_urls(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def mask_logged_urls(logger_name: str) -> None:
    """Mask URL credentials in every record ``logger_name`` logs (once per logger)."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, _MaskedRecords) for f in logger.filters):
        logger.addFilter(_MaskedRecords())
