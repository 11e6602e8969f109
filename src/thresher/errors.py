"""The one exception tree. Every error Thresher raises on purpose is a ThresherError.

The CLI maps each class to an exit code and prints its message on one line, without a
traceback: an error a user can fix (a bad URL, an unknown source, an unreachable database)
must say what to fix, not where in the code it happened.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "Deferred",
    "HostBusy",
    "Interrupted",
    "JobError",
    "LeaseLost",
    "PermanentError",
    "SourceError",
    "StoreError",
    "StoreUnavailable",
    "ThresherError",
    "TransientError",
    "UnknownSource",
    "UsageError",
]


def _rebuild(cls: type[TransientError], message: str, state: dict[str, Any]) -> Any:
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.__dict__.update(state)
    return exc


class ThresherError(Exception):
    """Base of every error Thresher raises on purpose."""

    exit_code = 1


class UsageError(ThresherError):
    """The user asked for something that cannot be done as asked."""

    exit_code = 2


class ConfigError(UsageError):
    """A configuration value (file, environment or flag) is invalid."""


class SourceError(UsageError):
    """A source definition is invalid (bad URL, unknown type, bad option)."""


class UnknownSource(UsageError):
    """No source has that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no source named {name!r} (see 'thresher source list')")
        self.name = name


class StoreError(ThresherError):
    """The store refused an operation (schema too new, constraint broken)."""

    exit_code = 3


class StoreUnavailable(StoreError):
    """The store cannot be opened or reached."""


class JobError(ThresherError):
    """Raised by job handlers; the job system decides whether to retry."""

    exit_code = 4


class TransientError(JobError):
    """Worth retrying later: timeouts, resets, 5xx, a busy database."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        # Whole, through pickle: a crawl's child process raises these to its parent.
        return (_rebuild, (type(self), str(self), self.__dict__))


class Deferred(TransientError):
    """Nothing failed, but the job cannot go on before `until`: it goes back to the job
    table until then, without counting an attempt, and frees its worker's slot."""

    def __init__(self, message: str, until: float, now: float) -> None:
        super().__init__(message, until - now)
        self.until = until


class HostBusy(Deferred):
    """The host's turn comes at `until`, later than a worker waits with a job in hand
    (another worker is fetching it, a Retry-After, a parked host, a queue of jobs for it)."""

    def __init__(self, host: str, until: float, now: float, why: str) -> None:
        super().__init__(f"{host}: its turn comes in {until - now:.0f} s ({why})", until, now)


class Interrupted(Deferred):
    """The job stopped because its process was asked to (SIGINT, SIGTERM): what it did
    is committed, and it goes back to the job table at once, no attempt counted, for
    the next run (or another worker) to carry on."""

    def __init__(self, message: str, now: float = 0.0) -> None:
        super().__init__(message, now, now)


class PermanentError(JobError):
    """Retrying will not help: 404, malformed input, a bug in the request."""


class LeaseLost(JobError):
    """The job's lease expired and another worker may hold it: drop the work, write nothing."""
