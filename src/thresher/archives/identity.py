"""The Python step of store migration 0013: stored messages get their normal form.

Migration 0013 (``store/migrations/*/0013_message_identity.sql``) tells messages apart
by the digest of their normal form (`thresher.archives.normal`) instead of their raw
bytes. SQL cannot compute that digest, so this step reads every stored message a batch
at a time, in id order, and writes its `norm_sha256`; a message without a Message-ID
gets its new key, ``sha256:`` + that digest, and a month whose stop sign named the old
key names the new one. The SQL after the step merges the copies and recomputes the
conflict flags. The step brings its own SQL: it must keep working on a store of
version 12 whatever the queries of later versions say.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..store import Tx
from .normal import normal_digest

__all__ = ["QUERIES", "migrate"]

# Raw messages held at once; a message is a few KB, the odd one a few MB.
BATCH = 500

QUERIES = """
-- name: messages_after
SELECT id, source, key, message_id, raw FROM messages WHERE id > :after ORDER BY id
LIMIT :limit

-- name: set_identity
UPDATE messages SET norm_sha256 = :norm, key = :key WHERE id = :id

-- name: rename_stop_key
UPDATE archive_months SET stop_key = :new WHERE source = :source AND stop_key = :old
"""


def migrate(tx: Tx) -> None:
    after = 0
    while True:
        rows = tx.all("messages_after", after=after, limit=BATCH)
        if not rows:
            return
        updates: list[dict[str, Any]] = []
        renamed: list[dict[str, Any]] = []
        for row in rows:
            raw = bytes(row["raw"])
            try:
                norm = normal_digest(raw)
            except Exception:  # as in archives.rows: the raw digest stands in
                norm = hashlib.sha256(raw).hexdigest()
            key = row["key"]
            if row["message_id"] is None:
                key = "sha256:" + norm
                if key != row["key"]:
                    renamed.append({"source": row["source"], "old": row["key"], "new": key})
            updates.append({"id": row["id"], "norm": norm, "key": key})
        tx.execute_many("set_identity", updates)
        if renamed:
            tx.execute_many("rename_stop_key", renamed)
        after = rows[-1]["id"]
