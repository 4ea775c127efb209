"""Per-token rate limit of ``POST /api/v1/reports``: a fixed one-minute window counted in Django's cache.

Every report a token posts in the current minute (wall-clock minute, the same for every server
process) adds one to ``topoweb:reports:<token prefix>:<minute>``, with an atomic ``cache.add`` and
``cache.incr``; past ``RATE_LIMIT_PER_MINUTE`` the token waits until the minute ends. The count
holds across server processes when the cache is shared (``TOPOWEB_CACHE_URL=redis://...``); with
the default local-memory cache each process counts on its own. A cache that cannot be reached
lets every report through (and says so in the log, at most once a minute per process): the limit
protects the server, it must never be the reason a report is lost.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60
_last_warning = [0.0]  # monotonic time of the last "cache unavailable" warning of this process


@dataclass(frozen=True)
class Limited:
    """A refused request: the limit that applied and the seconds until the window ends."""

    limit: int
    retry_after: int


def check_reports(token_prefix: str, *, now: float | None = None) -> Limited | None:
    """Count one report of the token ``token_prefix``; a ``Limited`` when it is over
    ``RATE_LIMIT_PER_MINUTE`` in this minute, else None (also when the limit is 0, i.e. off,
    and when the cache fails)."""
    limit = settings.RATE_LIMIT_PER_MINUTE
    if limit <= 0:
        return None
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    count = _count(f"topoweb:reports:{token_prefix}:{window}")
    if count is None or count <= limit:
        return None
    return Limited(limit=limit, retry_after=max(1, math.ceil((window + 1) * WINDOW_SECONDS - now)))


def _count(key: str) -> int | None:
    """Add one to ``key`` (created at 0 for two windows) and return the new count; None when the
    cache cannot be used."""
    try:
        cache.add(key, 0, timeout=2 * WINDOW_SECONDS)
        try:
            return cache.incr(key)
        except ValueError:  # expired between add and incr: this is the window's first report
            cache.set(key, 1, timeout=2 * WINDOW_SECONDS)
            return 1
    except Exception as exc:  # redis-py and other backends raise their own types; never fail the request
        _warn_unavailable(exc)
        return None


def _warn_unavailable(exc: Exception) -> None:
    now = time.monotonic()
    if now - _last_warning[0] >= WINDOW_SECONDS or _last_warning[0] == 0.0:
        _last_warning[0] = now
        log.warning("rate limit not applied: the cache is unavailable (%s: %s); reports are let through",
                    type(exc).__name__, exc)
