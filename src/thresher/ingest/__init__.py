"""Bulk ingest: fetch the full text a digital library says a URL holds.

Digital libraries (Unpaywall, CORE, Semantic Scholar, DOAJ, a DOI registry) send
millions of requests of the form "this URL should hold the full text of that paper",
each with an ``ingest_type`` (``pdf``, ``xml``, ``html``, ``dataset``). Thresher
follows redirects; when a landing page comes back instead of the file, it looks for
the link to the file and follows that, up to a hop limit.

- `thresher.ingest.sniff`: what a body is, from its bytes (``sniff_mimetype``), and
  whether that is what the request asked for (``expected_kind``).
- `thresher.ingest.landing`: the full-text link of a landing page
  (``find_fulltext_link``), by the rules the big hosting platforms follow.
- `thresher.ingest.request_line`: one line of a JSON Lines / TSV dump as a request
  (``parse_line``), or rejected with its reason.
- `thresher.ingest.requests`: dumps read (``read_requests``) and loaded into the store
  (``load_requests``), every rejected line counted.

The first two are pure functions of bytes and never raise.
"""

from .landing import FulltextLink, find_fulltext_link
from .request_line import IngestRequest, Rejected
from .requests import LoadReport, load_requests, read_requests
from .sniff import expected_kind, sniff_mimetype

__all__ = [
    "FulltextLink",
    "IngestRequest",
    "LoadReport",
    "Rejected",
    "expected_kind",
    "find_fulltext_link",
    "load_requests",
    "read_requests",
    "sniff_mimetype",
]
