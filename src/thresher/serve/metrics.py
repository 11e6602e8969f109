"""`/metrics`: what the store knows, in Prometheus' text exposition format (0.0.4).

Every value is read from the store at scrape time (there is no in-process counter: the
server only reads, and the work is done by other processes), so any number of
`thresher serve` processes report the same figures. Counters are totals the store keeps
(pages a crawl fetched over all its runs, bytes of month files downloaded); gauges are
states now (jobs per state, live workers). The names are listed in docs/serve.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..store import Tx

__all__ = ["CONTENT_TYPE", "collect_metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_Sample = tuple[dict[str, str], float]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(self, name: str, kind: str, help_: str, samples: Iterable[_Sample]) -> None:
        self.lines.append(f"# HELP thresher_{name} {help_}")
        self.lines.append(f"# TYPE thresher_{name} {kind}")
        suffix = "_total" if kind == "counter" else ""
        for labels, value in samples:
            text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            self.lines.append(
                f"thresher_{name}{suffix}{{{text}}} {_fmt(value)}"
                if text
                else f"thresher_{name}{suffix} {_fmt(value)}"
            )


def collect_metrics(tx: Tx, dashboard: dict[str, Any]) -> str:
    """The exposition text; `dashboard` is `data.dashboard(…)`, the dashboard's (read
    under the same store fingerprint, see Context.read_cached)."""
    status = dashboard["status"]
    out = _Out()
    out.metric(
        "jobs", "gauge", "Jobs in the job table, by state.",
        (({"state": k}, v) for k, v in status["jobs"].items()),
    )  # fmt: skip
    out.metric(
        "jobs_failed", "gauge", "Failed jobs still in the job table, by job kind.",
        (({"kind": r["kind"]}, int(r["n"])) for r in tx.all("serve_failed_jobs")),
    )  # fmt: skip
    runs = [(s, s["last_run"]) for s in status["sources"] if s["last_run"]]
    out.metric(
        "source_last_run", "gauge",
        "1 for each source's last run, labelled with its outcome.",
        (({"source": s["name"], "type": s["type"], "outcome": r["outcome"]}, 1) for s, r in runs),
    )  # fmt: skip
    out.metric(
        "source_shortfall", "gauge",
        "Messages the source counts that its last run did not store.",
        (({"source": s["name"]}, r["shortfall"]) for s, r in runs if r["shortfall"] is not None),
    )  # fmt: skip
    archives = [s for s in status["sources"] if "archive" in s]
    out.metric(
        "archive_messages", "gauge", "Distinct messages stored per mail archive.",
        (({"source": s["name"]}, s["archive"]["messages"]) for s in archives),
    )  # fmt: skip
    states: list[_Sample] = []
    for s in archives:
        extra = dashboard["extra"][s["name"]]["archive"]
        states += [
            ({"source": s["name"], "state": "complete"}, extra["complete"]),
            ({"source": s["name"], "state": "open"}, extra["open"]),
            ({"source": s["name"], "state": "short"}, extra["short"]),
        ]
    out.metric("archive_months", "gauge", "Months of each archive, by state.", states)
    totals = tx.all("serve_archive_totals")
    out.metric(
        "archive_fetches", "counter", "Month files fetched, over all runs.",
        (({"source": r["source"]}, int(r["fetches"] or 0)) for r in totals),
    )  # fmt: skip
    out.metric(
        "archive_bytes", "counter", "Bytes of month files downloaded, over all runs.",
        (({"source": r["source"]}, int(r["bytes"] or 0)) for r in totals),
    )  # fmt: skip
    out.metric(
        "archive_events", "counter",
        "Archive events (late mail, shrunk or changed months, conflicts), by kind.",
        (({"source": r["source"], "kind": r["kind"]}, int(r["n"]))
         for r in tx.all("serve_archive_event_kinds")),
    )  # fmt: skip
    crawls = tx.all("serve_crawl_totals")
    for field, help_ in (
        ("pages", "Pages (2xx) a crawl stored, over all runs."),
        ("bytes", "Payload bytes of the pages a crawl stored, over all runs."),
        ("errors", "Fetches a crawl failed for good (4xx, 5xx, timeouts, refusals)."),
        ("redirects", "3xx answers a crawl followed."),
        ("not_modified", "304 answers to a crawl's conditional requests."),
        ("duplicates", "Pages whose payload equalled an earlier page's."),
        ("robots_excluded", "URLs robots.txt did not allow."),
    ):
        out.metric(
            f"crawl_{field}", "counter", help_,
            (({"source": r["source"]}, int(r[field] or 0)) for r in crawls),
        )  # fmt: skip
    by_status = tx.all("ingest_report_by_status")
    out.metric(
        "ingest_results", "gauge", "Ingest results, by status (see docs/ingest.md).",
        (({"status": r["status"]}, int(r["results"])) for r in by_status),
    )  # fmt: skip
    files = tx.one("serve_files_total") or {"files": 0, "bytes": 0}
    out.metric("ingest_files", "gauge", "Files kept by ingest (once each by SHA-1).",
               [({}, int(files["files"]))])  # fmt: skip
    out.metric("ingest_file_bytes", "gauge", "Bytes of the files kept by ingest.",
               [({}, int(files["bytes"]))])  # fmt: skip
    workers = status["workers"]
    out.metric("workers", "gauge", "Worker processes with a recent heartbeat.",
               [({}, len(workers))])  # fmt: skip
    w_labels = [({"worker": w["name"], "hostname": w["hostname"]}, w) for w in workers]
    out.metric(
        "worker_jobs_done", "counter", "Jobs a live worker has done since it started.",
        ((labels, w["jobs_done"]) for labels, w in w_labels),
    )  # fmt: skip
    out.metric(
        "worker_jobs_per_second", "gauge", "A live worker's jobs per second since it started.",
        ((labels, w["jobs_per_second"]) for labels, w in w_labels),
    )  # fmt: skip
    out.metric(
        "worker_leased_jobs", "gauge", "Jobs a live worker holds now.",
        ((labels, len(w["jobs"])) for labels, w in w_labels),
    )  # fmt: skip
    out.metric(
        "worker_held_hosts", "gauge", "Hosts a live worker holds now (PostgreSQL store).",
        ((labels, len(w["hosts"])) for labels, w in w_labels),
    )  # fmt: skip
    return "\n".join(out.lines) + "\n"
