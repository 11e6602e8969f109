"""The archive kinds: one small adapter per kind beside the one shared unit job.

Each module holds one kind: how its URLs look, how it lists its units (with the
archive's own counts where it gives them) and how a unit is read and split into
messages, as an `ArchiveKind` (`base`). `BUILTIN` is every kind Thresher ships;
`thresher.sources.archives.register_kind` makes each a source type with its root job.
Adding a kind is adding a module and its line here (docs/mail.md, "Adding a kind").

The parsing functions of the kinds are re-exported here, as they were when this was
one module.
"""

from __future__ import annotations

from ..units import Month, Unit
from .base import ArchiveIndexError, ArchiveKind, Got, Harvest, Listing, PageMissing, Port
from .files import FileKind
from .hyperkitty import (
    HyperKitty,
    HyperKittyPage,
    hyperkitty_emails_url,
    hyperkitty_export_url,
    hyperkitty_key,
    hyperkitty_list_url,
    hyperkitty_parts,
    parse_hyperkitty_emails,
    parse_hyperkitty_list,
)
from .mbox import Mbox, mbox_month
from .mhonarc import MHonArc
from .modmbox import ModMbox, parse_modmbox_index
from .pipermail import Pipermail, parse_pipermail_index, pipermail_index_url
from .ponymail import (
    PonyMail,
    parse_ponymail_stats,
    ponymail_mbox_url,
    ponymail_parts,
    ponymail_stats_url,
)

__all__ = [
    "BUILTIN",
    "KINDS",
    "ArchiveIndexError",
    "ArchiveKind",
    "FileKind",
    "Got",
    "Harvest",
    "HyperKittyPage",
    "Listing",
    "Month",
    "PageMissing",
    "Port",
    "Unit",
    "hyperkitty_emails_url",
    "hyperkitty_export_url",
    "hyperkitty_key",
    "hyperkitty_list_url",
    "hyperkitty_parts",
    "mbox_month",
    "parse_hyperkitty_emails",
    "parse_hyperkitty_list",
    "parse_modmbox_index",
    "parse_pipermail_index",
    "parse_ponymail_stats",
    "pipermail_index_url",
    "ponymail_mbox_url",
    "ponymail_parts",
    "ponymail_stats_url",
]

BUILTIN: tuple[ArchiveKind, ...] = (
    Pipermail(),
    ModMbox(),
    PonyMail(),
    HyperKitty(),
    Mbox(),
    MHonArc(),
)

# Their names: the mail source types.
KINDS = tuple(kind.name for kind in BUILTIN)
