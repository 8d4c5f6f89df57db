"""PostgreSQL store URLs: recognising them and printing them without credentials.

Pure string work, importing no driver: the command line decides with :func:`is_postgres_url`
whether an argument is a store URL or a path before anything heavy loads, and every message
that names a store uses :func:`redact` so no password ever reaches a terminal or a log.
"""

from __future__ import annotations

import re

__all__ = ["SCHEMES", "is_postgres_url", "redact"]

SCHEMES = ("postgresql://", "postgres://")
"""The URL schemes libpq accepts, and so the ones a store argument may start with."""

# userinfo = everything between the scheme and the last "@" before the host part.
_USERINFO = re.compile(r"^(?P<scheme>postgres(?:ql)?://)(?P<userinfo>[^/?#]*)@", re.IGNORECASE)
_QUERY_SECRET = re.compile(r"(?P<key>(?:^|[?&])(?:password|sslpassword)=)[^&#]*", re.IGNORECASE)


def is_postgres_url(value: str) -> bool:
    """Whether ``value`` is a ``postgresql://`` (or ``postgres://``) URL, not a path."""
    return value[:13].lower().startswith(SCHEMES)


def redact(url: str) -> str:
    """``url`` with any password (in the userinfo or a ``password=`` parameter) as ``***``.

    The user name, host, port, database and other parameters stay: they say which store
    is meant, and none of them is a secret.
    """

    def userinfo(match: re.Match[str]) -> str:
        info = match.group("userinfo")
        user, colon, _ = info.partition(":")
        return f"{match.group('scheme')}{user}{':***' if colon else ''}@"

    redacted = _USERINFO.sub(userinfo, url, count=1)
    head, mark, query = redacted.partition("?")
    if not mark:
        return redacted
    return head + mark + _QUERY_SECRET.sub(lambda m: f"{m.group('key')}***", query)
