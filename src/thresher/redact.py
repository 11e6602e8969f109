"""Secrets out of everything Thresher prints: one way to mask a store's credentials.

A PostgreSQL store is named by a URL or a keyword/value connection string, and either
may carry a password in three places: the URL's user information
(``postgresql://alice:PW@host/db``), its query (``?password=PW``; also
``sslpassword=``, the client key's) and a keyword/value pair (``host=h password=PW``,
``password='P W'`` quoted). `redact_url` masks all of them in a store URL;
`redact_text` masks every such form wherever it appears in a message, and also every
password of the URLs it is given and of the one `remember`ed (the process's store),
wherever it appears, because libraries echo parts of a bad URL on their own (libpq
quotes a bad percent-escape of the password as it is). `thresher config`, `status`,
error messages and log lines go through them. Passwords in ``PGPASSWORD`` or a
``.pgpass`` file are read by libpq itself and never pass through Thresher.

A password shorter than `MIN_FREE_SECRET` characters is masked only where it stands as
a password (masking every "ab" in a log line would garble it, and protect little).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote

__all__ = [
    "MASK",
    "MIN_FREE_SECRET",
    "RedactingFilter",
    "redact_text",
    "redact_url",
    "remember",
    "secrets_of",
]

MASK = "***"
MIN_FREE_SECRET = 4

_SCHEME_USER = r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:@/?#]*:)"
# user:PASSWORD@ in a store URL: the password runs to the last "@" of the URL, so an
# unescaped "@" or "/" in it is masked too.
_STORE_USERINFO = re.compile(_SCHEME_USER + r"(\S*)@")
# user:PASSWORD@ in any text: within the URL's authority only.
_USERINFO = re.compile(_SCHEME_USER + r"([^\s/?#]*)@")
# password=… (also sslpassword=…) in a URL's query: up to "&" or "#".
_QUERY = re.compile(r"(?i)([?&](?:ssl)?password=)([^&#\s]*)")
# password=… in a keyword/value string: quoted (backslash escapes), or up to white space.
_KEYWORD = re.compile(r"(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)")
# password=… in any text: quoted, or up to white space, "&" or "#".
_ANY = re.compile(r"(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&#]*)")

_remembered: set[str] = set()


def _is_url(url: str) -> bool:
    return "://" in url


def _mask(match: re.Match[str]) -> str:
    return f"{match.group(1)}{MASK}" if match.group(2) else match.group(0)


def secrets_of(url: str) -> set[str]:
    """The passwords a store URL or keyword/value string carries, as written and
    percent-decoded (quoted ones unquoted)."""
    found: set[str] = set()
    if _is_url(url):
        found.update(m.group(2) for m in _STORE_USERINFO.finditer(url))
        found.update(m.group(2) for m in _QUERY.finditer(url))
    else:
        for m in _KEYWORD.finditer(url):
            value = m.group(2)
            if value.startswith("'"):
                value = re.sub(r"\\(.)", r"\1", value[1:].removesuffix("'"))
            found.add(value)
    found |= {unquote(s) for s in found}
    return {s for s in found if s and s != MASK}


def remember(url: str | None) -> None:
    """Mask the passwords of `url` in everything `redact_text` sees from now on: log
    lines do not say which URL they might quote. Called with the process's store URL."""
    if url:
        _remembered.update(secrets_of(url))


def redact_url(url: str) -> str:
    """A store URL or keyword/value string with every password masked, fit to print."""
    if _is_url(url):
        return _QUERY.sub(_mask, _STORE_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", url))
    return _KEYWORD.sub(_mask, url)


def redact_text(text: str, *urls: str | None) -> str:
    """`text` with credentials masked: every URL user:password and password= in it,
    and every password of `urls` and of the remembered URL wherever it appears."""
    secrets = set(_remembered)
    for url in urls:
        if url:
            secrets |= secrets_of(url)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _ANY.sub(_mask, text)
    # Longest first: a password that contains another is masked whole.
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_FREE_SECRET:
            text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    """Masks credentials in every record it passes (see `redact_text`), tracebacks
    included."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True
