"""Reading TOPOWEB_* settings from the environment, failing loudly on bad values.

Every misconfigured variable raises ``ImproperlyConfigured`` with the variable's name and what
was expected, so a server never starts half-configured.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r}: expected one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, minimum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r}: expected a whole number") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={value!r}: must be at least {minimum}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        raise ImproperlyConfigured(f"{name} is set but empty: give a comma-separated list")
    return items


def check_time_limits(soft: int, hard: int, lease: int) -> None:
    """Require soft < hard < lease: a task is asked to stop (soft limit), then killed (hard limit),
    and only after that may its upload's lease run out and another worker claim it."""
    if not soft < hard:
        raise ImproperlyConfigured(
            f"TOPOWEB_TASK_SOFT_TIME_LIMIT={soft} must be below TOPOWEB_TASK_TIME_LIMIT={hard} "
            "(the soft limit lets a task record its failure before the hard limit kills it)")
    if not hard < lease:
        raise ImproperlyConfigured(
            f"TOPOWEB_PROCESSING_LEASE_SECONDS={lease} must be above TOPOWEB_TASK_TIME_LIMIT={hard} "
            "(an upload must never be claimed again while its first task may still run)")


def cache_from_url(name: str, url: str | None) -> dict:
    """Django ``CACHES["default"]`` for a cache URL: ``redis://`` / ``rediss://`` / ``unix://`` (shared
    by every process using it), ``locmem://`` or unset (this process only)."""
    if not url or url == "locmem://":
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "topoweb"}
    if url.startswith(("redis://", "rediss://", "unix://")):
        # Short timeouts: a cache host that is down must cost a request milliseconds, not seconds.
        return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url,
                "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}
    raise ImproperlyConfigured(f"{name}={url!r}: expected redis://HOST:PORT/DB, rediss://..., unix://... "
                               "or locmem:// (this process only)")
