"""Mailing-list archives: bytes to messages, months to decisions; no I/O but the demo's.

The job handlers in `thresher.sources.archives` fetch and store; everything they decide
with lives here, as pure functions or as kinds that fetch only through the port they
are handed, tested exhaustively and benchmarked on its own:

- `mbox`: `maybe_gunzip` (sniffed, size-capped, truncation-tolerant), `split_mbox` /
  `iter_mbox` (strict envelope lines, byte offsets, mboxrd un-escaping).
- `message`: `parse_message` (Message-ID key, UTC date with a flag, decoded From and
  Subject, threading headers; never raises); `body`: the text that search indexes.
- `months`: calendar arithmetic and the completion rule (grace period).
- `units`: an archive's units as listed (`Unit`) and as remembered (`Known`).
- `kinds`: one adapter per archive kind (pipermail, mod_mbox, Pony Mail, HyperKitty,
  mbox, …): how it lists its units and reads one, through the `Port` its job hands it.
- `harvest`: one mbox file, incrementally: decide, conditional and Range requests,
  answers absorbed against the stop sign.
- `rows`: messages to store rows (in a child process for big months).
- `export`, `search`: mboxrd / JSON Lines out, full-text search in.
- `demo`, `demo_messages`: the built-in archive served on 127.0.0.1 (imports aiohttp;
  not re-exported here).
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
