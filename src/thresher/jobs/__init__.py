"""Durable jobs: leased, retried with backoff, committed exactly once, joined by commits."""

from .handlers import Handler, JobContext, register
from .model import Job, JobSpec, JobState, Outcome
from .runner import PoolStats
from .worker import WorkerPool

__all__ = [
    "Handler",
    "Job",
    "JobContext",
    "JobSpec",
    "JobState",
    "Outcome",
    "PoolStats",
    "WorkerPool",
    "register",
]
