"""Full-text search over stored list messages, the same on SQLite and PostgreSQL.

What a user types is never handed to a query language: FTS5 and tsquery both have
operators (``AND``, ``NOT``, ``*``, ``-``, ``:``, ``^``, parentheses, column filters)
that turn ordinary text into syntax errors or into a different question. The query is
cut into terms instead: each ``"quoted phrase"`` is one term, every other
whitespace-separated word is one term (an unmatched ``"`` quotes the rest of the line),
and all terms must match. Punctuation carries no meaning; a term without a letter or
digit (``*``, ``-``, ``:``) is dropped, control characters separate words, and a query
with no terms finds nothing.

Why each backend tokenizes the terms itself: on SQLite every term becomes an FTS5 string
(``"..."``, with ``"`` doubled), which FTS5 splits with the table's own tokenizer into a
phrase; on PostgreSQL every term goes through ``phraseto_tsquery('simple', ...)``, the
parser that built the stored tsvector. A term is thus split exactly the way the indexed
text was, so ``alice@example.org`` or ``foo-bar`` finds the messages containing it on
both backends, and for words and phrases both return the same messages. The parsers are
not identical, though: PostgreSQL keeps e-mail addresses, host names, URLs and numbers
with dots as single lexemes and does not fold accents, so ``example`` alone does not
find ``alice@example.org`` there, and ``cafe`` finds ``café`` only on SQLite.

Order: best match first (bm25 on SQLite, ts_rank on PostgreSQL; the scores differ, the
sets do not), then newest first, then highest id; `limit` cuts that list. Only the newest
`RANKED` matches (highest ids, found in that order through the index) are ranked: a word
in most of a million messages would otherwise be scored a million times (about a
second), and a reader of that many hits wants the recent ones anyway.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from ..store import Row, Tx

__all__ = [
    "RANKED",
    "SNIPPET_CHARS",
    "fts5_query",
    "parse_query",
    "search_messages",
    "split_snippet",
]

# Matches ranked at most, the newest: a search's cost is bounded by this, not the store.
RANKED = 10_000

# Snippets are cut to about this many characters.
SNIPPET_CHARS = 160

# The database marks a match in the snippet with these (STX, ETX).
MARK_START = "\x02"
MARK_END = "\x03"

_TERM = re.compile(r'"([^"]*)(?:"|$)|([^\s"]+)')
_SPACE = re.compile(r"\s+")


def parse_query(query: str) -> list[str]:
    """The terms of a user's query: quoted phrases and single words, in order, without
    duplicates and without terms that have no letter or digit."""
    # Control characters (NUL, lone surrogates from undecodable arguments) would fail in
    # the driver or the database, not in the query language: they separate words.
    query = "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in query)
    terms: list[str] = []
    for match in _TERM.finditer(query):
        phrase, word = match.groups()
        term = _SPACE.sub(" ", phrase if phrase is not None else word).strip()
        if any(ch.isalpha() or ch.isdecimal() for ch in term) and term not in terms:
            terms.append(term)
    return terms


def fts5_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression requiring every term: only quoted strings, so no input
    can be read as FTS5 syntax."""
    return " AND ".join('"' + term.replace('"', '""') + '"' for term in terms)


def split_snippet(marked: Any) -> tuple[str, list[tuple[int, int]]]:
    """A snippet as the database marks it (matches between `MARK_START` and `MARK_END`)
    turned into plain text, whitespace collapsed and cut to about `SNIPPET_CHARS`, and
    the (start, end) character offsets of the matches in it."""
    pieces = re.split(f"[{MARK_START}{MARK_END}]", _SPACE.sub(" ", str(marked or "")).strip())
    text = ""
    spans: list[tuple[int, int]] = []
    for i, piece in enumerate(pieces):
        if i % 2 and piece:
            spans.append((len(text), len(text) + len(piece)))
        text += piece
    if len(text) > SNIPPET_CHARS:
        cut = text.rfind(" ", 0, SNIPPET_CHARS)
        cut = cut if cut > SNIPPET_CHARS // 2 else SNIPPET_CHARS
        text = text[:cut].rstrip()
        spans = [(a, min(b, len(text))) for a, b in spans if a < len(text)]
        text += "…"
    return text, spans


def search_messages(
    tx: Tx,
    backend: str,
    query: str,
    source: str | None = None,
    limit: int = 20,
    ranked: int = RANKED,
) -> list[Row]:
    """Messages matching every term of `query` (see the module docstring), best first
    of the newest `ranked` matches.

    Each row has id, source, month, date (epoch seconds or None), from_name, from_addr,
    subject, message_id, snippet (a short piece of the body around the matches, plain
    text) and matches (the (start, end) offsets of the matched words in the snippet).
    `backend` is the store's ('sqlite' or 'postgres')."""
    if backend not in ("sqlite", "postgres"):
        raise ValueError(f"unknown backend {backend!r}")
    terms = parse_query(query)
    if not terms or limit <= 0:
        return []
    rows = tx.all(
        "search_messages",
        fts=fts5_query(terms),
        terms=json.dumps(terms),
        source=source,
        limit=limit,
        ranked=max(ranked, limit),
    )
    for row in rows:
        row["snippet"], row["matches"] = split_snippet(row["snippet"])
    return rows
