"""Mailing-list archives as bytes in, messages out: pure functions, no I/O.

Archive adapters fetch a month file (pipermail, mod_mbox, Pony Mail, HyperKitty, plain
mbox) and hand its bytes here; keeping the splitting and parsing free of I/O lets them be
tested exhaustively (hypothesis) and benchmarked on their own.

- `thresher.archives.mbox`: `maybe_gunzip` (sniffed, size-capped, truncation-tolerant),
  `split_mbox` / `iter_mbox` (strict envelope lines, byte offsets, mboxrd un-escaping).
- `thresher.archives.message`: `parse_message` (Message-ID key, UTC date with a flag,
  decoded From and Subject, threading headers; never raises).
"""

from .mbox import ArchiveTooLarge, RawMessage, iter_mbox, maybe_gunzip, split_mbox
from .message import Message, normalize_message_id, parse_date, parse_message

__all__ = [
    "ArchiveTooLarge",
    "Message",
    "RawMessage",
    "iter_mbox",
    "maybe_gunzip",
    "normalize_message_id",
    "parse_date",
    "parse_message",
    "split_mbox",
]
