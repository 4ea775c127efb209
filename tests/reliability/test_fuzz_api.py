"""Fuzzing the API: the report envelope, and every operation of ``/api/v1/openapi.json``.

A client error must be a clean 4xx with the JSON ``{"error", "code"}`` body; nothing a client can
send may cause a 500. The OpenAPI fuzzer reads the served schema (so a new endpoint is fuzzed
without a change here) and draws path and query parameters of the declared types, plus values of
the wrong type, with four identities: anonymous, a logged-in session, a valid agent token, and a
malformed token.
"""

from __future__ import annotations

import json
import string
from urllib.parse import quote, urlencode

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.domain.parsers import KINDS

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=30)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)
hostnames = st.text(max_size=40) | st.from_regex(r"\A[a-z0-9][a-z0-9.-]{0,20}\Z")
section_text = st.text(max_size=300) | st.sampled_from(["GPU0\tGPU1\n", " X \n", "\x00", "<a>", "\ufeffCA 'mlx5_0'\n"])

envelopes = st.fixed_dictionaries(
    {"schema": st.sampled_from(["topoweb.report/1", "topoweb.report/2", ""]) | json_values,
     "hostname": hostnames | json_values,
     "sections": st.dictionaries(st.sampled_from(list(KINDS)) | st.text(max_size=12),
                                 section_text | json_values, max_size=3) | json_values},
    optional={"collected_at": st.sampled_from(["2025-01-31T12:00:00Z", "yesterday", "2025-13-45T99:00:00"])
              | json_values,
              "agent_version": json_values, "meta": json_values, "unavailable": json_values},
)


def _assert_clean(resp, what: str) -> None:
    assert resp.status_code < 500, f"{what}: {resp.status_code} {resp.content[:300]!r}"
    if 400 <= resp.status_code < 500 and resp.get("Content-Type", "").startswith("application/json"):
        body = json.loads(resp.content)
        assert isinstance(body, dict) and "error" in body, f"{what}: {body!r}"
    assert b"Traceback" not in resp.content


@pytest.mark.django_db
@FUZZ
@given(report=envelopes)
def test_report_envelope_never_500(cluster_with_token, report):
    agent = Client(HTTP_AUTHORIZATION=f"Bearer {cluster_with_token[1]}")
    resp = agent.post("/api/v1/reports", data=json.dumps(report), content_type="application/json")
    _assert_clean(resp, "POST /api/v1/reports")
    assert resp.status_code in (202, 400, 413), resp.status_code


@pytest.mark.django_db
@FUZZ
@given(body=st.binary(max_size=300) | st.text(max_size=300).map(str.encode)
       | json_values.map(lambda v: json.dumps(v).encode()))
def test_report_body_bytes_never_500(cluster_with_token, body):
    agent = Client(HTTP_AUTHORIZATION=f"Bearer {cluster_with_token[1]}")
    resp = agent.post("/api/v1/reports", data=body, content_type="application/json")
    _assert_clean(resp, "POST /api/v1/reports (raw bytes)")
    assert resp.status_code in (202, 400, 413)


# -------------------------------------------------------------------------------- OpenAPI


def _operations() -> list[tuple[str, str, dict]]:
    from django.test import Client as C

    schema = json.loads(C().get("/api/v1/openapi.json").content)
    ops = []
    for path, item in schema["paths"].items():
        for method, op in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                ops.append((path, method, op))
    return ops


def _value(schema: dict) -> st.SearchStrategy:
    t = schema.get("type")
    wrong = st.text(alphabet=string.printable, max_size=12) | st.integers(-2**80, 2**80).map(str)
    if t == "integer":
        return st.integers(-2**70, 2**70).map(str) | wrong
    if t == "number":
        return st.floats(allow_nan=True, allow_infinity=True).map(str) | wrong
    if t == "boolean":
        return st.sampled_from(["true", "false", "1", "0"]) | wrong
    if "enum" in schema:
        return st.sampled_from([str(v) for v in schema["enum"]]) | wrong
    return st.text(max_size=40) | st.sampled_from(["1/GPU0", "alpha/h/GPU0", "../../etc/passwd", "%00", "GPU0"])


@st.composite
def _request(draw, op: tuple[str, str, dict]):
    path, method, spec = op
    url = path
    query = {}
    for p in spec.get("parameters", []):
        value = draw(_value(p.get("schema", {})))
        if p["in"] == "path":
            url = url.replace("{" + p["name"] + "}", quote(value, safe="") or "x")
        elif p["in"] == "query" and draw(st.booleans()):
            query[p["name"]] = value
    body = None
    if method in ("post", "put", "patch"):
        body = json.dumps(draw(json_values)).encode() if draw(st.booleans()) else json.dumps(draw(envelopes)).encode()
    return method, url + ("?" + urlencode(query) if query else ""), body, draw(st.sampled_from(
        ["anonymous", "session", "token", "bad-token"]))


@pytest.mark.django_db
def test_openapi_schema_lists_operations(client):
    ops = _operations()
    assert any(p.endswith("/reports") for p, _, _ in ops) and len(ops) >= 5


@pytest.mark.django_db
@FUZZ
@given(data=st.data())
def test_every_openapi_operation_never_500(cluster_with_token, user, data):
    ops = _operations()
    op = data.draw(st.sampled_from(ops), label="operation")
    method, url, body, who = data.draw(_request(op), label="request")
    c = Client()
    headers = {}
    if who == "session":
        c.force_login(user)
    elif who == "token":
        headers["HTTP_AUTHORIZATION"] = f"Bearer {cluster_with_token[1]}"
    elif who == "bad-token":
        headers["HTTP_AUTHORIZATION"] = "Bearer tw_00000000_" + "x" * 43
    full = "/api/v1" + url if not url.startswith("/api/v1") else url
    kwargs = {"content_type": "application/json", "data": body} if body is not None else {}
    resp = getattr(c, method)(full, **kwargs, **headers)
    _assert_clean(resp, f"{method.upper()} {full} as {who}")
