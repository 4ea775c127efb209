"""Per-token rate limit of POST /api/v1/reports (``apps.ingest.ratelimit``, TOPOWEB_RATE_LIMIT_PER_MINUTE,
TOPOWEB_CACHE_URL): 429 with Retry-After past the limit, tokens counted apart, the cache shared
by processes when it is Redis, and a cache that is down never refusing a report."""

from __future__ import annotations

import logging
import os
import time
import types

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from apps.ingest import ratelimit, services
from apps.ingest.models import Upload
from tests.ingest.helpers import body, report
from topoweb.env import cache_from_url

REDIS_URL = os.environ.get("TOPOWEB_TEST_CACHE_REDIS_URL", "redis://127.0.0.1:6379/14")
WINDOW_START = 1_800_000_000.0  # a minute boundary (divisible by 60)

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock(monkeypatch):
    """The limiter's wall clock, fixed at 15 s into a minute; ``clock.now`` may be moved."""
    fake = types.SimpleNamespace(now=WINDOW_START + 15.0)
    monkeypatch.setattr(ratelimit, "time", types.SimpleNamespace(time=lambda: fake.now, monotonic=time.monotonic))
    return fake


@pytest.fixture
def limited(settings, clock):
    settings.RATE_LIMIT_PER_MINUTE = 3
    cache.clear()
    yield settings
    cache.clear()


def agent(secret: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def post(client: Client, hostname: str):
    return client.post("/api/v1/reports", body(report(hostname=hostname)), content_type="application/json")


def test_over_the_limit_is_429_with_retry_after_until_the_minute_ends(cluster_with_token, limited, clock):
    client = agent(cluster_with_token[1])
    assert [post(client, f"h{i}").status_code for i in range(3)] == [202, 202, 202]
    over = post(client, "h3")
    assert over.status_code == 429
    assert over["Retry-After"] == "45"  # 15 s into the minute
    data = over.json()
    assert data["code"] == "rate_limited" and data["retry_after"] == 45
    assert "at most 3 a minute" in data["error"] and "TOPOWEB_RATE_LIMIT_PER_MINUTE" in data["error"]
    assert not Upload.objects.filter(host__hostname="h3").exists()  # nothing stored
    clock.now = WINDOW_START + 59.5
    assert post(client, "h3")["Retry-After"] == "1"  # never 0
    clock.now = WINDOW_START + 60.0  # the next minute
    assert post(client, "h3").status_code == 202


def test_tokens_are_counted_apart(cluster_with_token, limited):
    cluster, first = cluster_with_token
    _, second = services.issue_token(cluster=cluster, name="second")
    other_cluster = services.create_cluster(name="beta")
    _, third = services.issue_token(cluster=other_cluster)
    a = agent(first)
    assert [post(a, f"a{i}").status_code for i in range(4)] == [202, 202, 202, 429]
    assert post(agent(second), "b0").status_code == 202  # same cluster, another token
    assert post(agent(third), "c0").status_code == 202


def test_zero_turns_the_limit_off(cluster_with_token, limited):
    limited.RATE_LIMIT_PER_MINUTE = 0
    client = agent(cluster_with_token[1])
    assert {post(client, f"h{i}").status_code for i in range(6)} == {202}


def test_bad_and_unauthenticated_requests_are_not_counted_for_a_token(cluster_with_token, limited):
    client = agent(cluster_with_token[1])
    assert agent("tw_wrong").post("/api/v1/reports", b"{}", content_type="application/json").status_code == 401
    assert [post(client, f"h{i}").status_code for i in range(3)] == [202, 202, 202]


def test_cache_down_lets_reports_through_and_logs_it(cluster_with_token, settings, monkeypatch, caplog):
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.RATE_LIMIT_PER_MINUTE = 3
    settings.CACHES = {"default": cache_from_url("TOPOWEB_CACHE_URL", f"redis://127.0.0.1:{port}/0")}
    monkeypatch.setattr(ratelimit, "_last_warning", [0.0])
    client = agent(cluster_with_token[1])
    with caplog.at_level(logging.WARNING, logger="apps.ingest.ratelimit"):
        assert [post(client, f"h{i}").status_code for i in range(5)] == [202] * 5
    warnings = [r for r in caplog.records if r.name == "apps.ingest.ratelimit"]
    assert len(warnings) == 1 and "cache is unavailable" in warnings[0].getMessage()  # once, not per report


@pytest.mark.services
def test_a_redis_cache_is_shared_by_processes(cluster_with_token, limited, clock):
    """Two cache clients (as two server processes have) count into the same window."""
    import redis
    from django.core.cache.backends.redis import RedisCache

    try:
        redis.Redis.from_url(REDIS_URL).flushdb()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"Redis is not running at {REDIS_URL} (make services)")
    conf = cache_from_url("TOPOWEB_CACHE_URL", REDIS_URL)
    limited.CACHES = {"default": conf}
    one, two = (RedisCache(conf["LOCATION"], {"OPTIONS": conf["OPTIONS"]}) for _ in range(2))
    key = "topoweb:reports:tw_shared:1"
    one.add(key, 0, 60)
    two.add(key, 0, 60)
    assert (one.incr(key), two.incr(key), one.incr(key)) == (1, 2, 3)
    client = agent(cluster_with_token[1])
    assert [post(client, f"h{i}").status_code for i in range(4)] == [202, 202, 202, 429]
    redis.Redis.from_url(REDIS_URL).flushdb()


def test_cache_url_setting():
    assert cache_from_url("X", None)["BACKEND"].endswith("LocMemCache")
    assert cache_from_url("X", "locmem://")["BACKEND"].endswith("LocMemCache")
    conf = cache_from_url("X", "redis://127.0.0.1:6379/1")
    assert conf["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert conf["LOCATION"] == "redis://127.0.0.1:6379/1"
    with pytest.raises(ImproperlyConfigured, match="TOPOWEB_CACHE_URL"):
        cache_from_url("TOPOWEB_CACHE_URL", "memcached://127.0.0.1:11211")


def test_window_counting_without_the_api(settings):
    settings.RATE_LIMIT_PER_MINUTE = 2
    cache.clear()
    start = WINDOW_START + 120
    assert ratelimit.check_reports("tw_unit", now=start) is None
    assert ratelimit.check_reports("tw_unit", now=start + 1) is None
    refused = ratelimit.check_reports("tw_unit", now=start + 30.2)
    assert refused == ratelimit.Limited(limit=2, retry_after=30)
    assert ratelimit.check_reports("tw_unit", now=start + 60) is None  # a new window
    cache.clear()
