"""Fuzzing every payload parser (correlate/ingest: Alertmanager, Grafana, Events API): whatever a
sender posts, a parser returns what it could read or raises its own `PayloadError`, never anything
else; and through the real webhook no body gets a 500.

Documents are drawn from the fields the real senders use (tests/fixtures holds recorded bodies)
with hostile values in them (NUL, lone surrogates, huge and negative numbers, NaN, deep nesting,
wrong types), plus recorded bodies with one value replaced and plain random bytes. Under CI the
examples are derandomized, so a run is repeatable; locally each run draws new ones.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from correlate.ingest import DOCUMENT_PARSERS, PARSERS, ParseResult, PayloadError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECEIVED = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
FUZZ = settings(
    max_examples=int(os.environ.get("ROOTLINE_FUZZ_EXAMPLES", "300")),
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# The fields the three senders' bodies use, at any level: a fuzzer that only invents keys would
# rarely reach the code past a parser's first check.
FIELDS = [
    "version", "status", "receiver", "alerts", "labels", "annotations", "startsAt", "endsAt",
    "generatorURL", "fingerprint", "groupKey", "groupLabels", "commonLabels", "commonAnnotations",
    "externalURL", "truncatedAlerts", "orgId", "title", "state", "message", "ruleId", "ruleName",
    "ruleUrl", "evalMatches", "values", "valueString", "silenceURL", "dashboardURL", "panelURL",
    "routing_key", "service_key", "event_action", "event_type", "dedup_key", "incident_key",
    "payload", "summary", "source", "severity", "timestamp", "component", "group", "class",
    "custom_details", "links", "images", "description", "details", "client", "client_url",
    "alertname", "cluster", "namespace", "pod", "node", "gpu", "model_name", "deployment",
]  # fmt: skip
HOSTILE_TEXT = st.sampled_from(
    ["", "\x00", "\ud800", "a\x00b", "firing", "resolved", "trigger", "resolve", "acknowledge",
     "0001-01-01T00:00:00Z", "2026-11-29T02:00:00Z", "2026-13-45T99:99:99Z", "9999-12-31T23:59:59Z",
     "-1", "1e309", "NaN", " " * 3, "x" * 5000, "ça", "🙂", "critical", "info", "warning"]
)  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | HOSTILE_TEXT
    | st.text(max_size=40)
)
KEYS = st.sampled_from(FIELDS) | st.text(max_size=12)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(KEYS, children, max_size=10),
    max_leaves=60,
)


def recorded_bodies() -> dict[str, list[bytes]]:
    bodies: dict[str, list[bytes]] = {kind: [] for kind in PARSERS}
    for kind in PARSERS:
        for path in sorted((FIXTURES / kind).rglob("*.json")):
            bodies[kind].append(path.read_bytes())
    return bodies


RECORDED = recorded_bodies()


def encoded(document: Any) -> bytes:
    """JSON as a sender's library would write it; NaN and lone surrogates included (Python's
    json writes both, and so do some senders)."""
    return json.dumps(document, allow_nan=True).encode("utf-8", "surrogatepass")


def encoded_text(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def parses_or_refuses(kind: str, body: bytes) -> None:
    try:
        result = PARSERS[kind](body, RECEIVED)
    except PayloadError:
        return
    assert isinstance(result, ParseResult)
    for alert in result.alerts:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in alert.labels.items())
        assert alert.starts_at.tzinfo is not None


def replace_somewhere(document: Any, path: list[int], value: Any) -> Any:
    """`document` with the value at the place `path` picks (an index into each level) replaced."""
    if not path or not isinstance(document, (dict, list)) or not document:
        return value
    if isinstance(document, dict):
        key = list(document)[path[0] % len(document)]
        return {**document, key: replace_somewhere(document[key], path[1:], value)}
    index = path[0] % len(document)
    return [*document[:index], replace_somewhere(document[index], path[1:], value), *document[index + 1 :]]


@pytest.mark.parametrize("kind", sorted(PARSERS))
@FUZZ
@given(document=DOCUMENTS)
def test_a_parser_reads_any_document_or_refuses_it_with_its_own_error(kind, document):
    parses_or_refuses(kind, encoded(document))
    try:
        DOCUMENT_PARSERS[kind](document, RECEIVED)
    except PayloadError:
        pass


@pytest.mark.parametrize("kind", sorted(PARSERS))
@FUZZ
@given(data=st.data())
def test_a_recorded_body_with_one_value_replaced_parses_or_is_refused(kind, data):
    body = data.draw(st.sampled_from(RECORDED[kind]))
    document = json.loads(body)
    path = data.draw(st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=6))
    value = data.draw(DOCUMENTS)
    parses_or_refuses(kind, encoded(replace_somewhere(document, path, value)))


@pytest.mark.parametrize("kind", sorted(PARSERS))
@FUZZ
@given(body=st.binary(max_size=2000) | st.text(max_size=500).map(lambda text: encoded_text(text)))
def test_a_parser_refuses_bytes_that_are_no_json_with_its_own_error(kind, body):
    parses_or_refuses(kind, body)


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_the_fuzzers_start_from_bodies_that_parse(kind):
    """Guards the fuzzers themselves: each sender has recorded bodies that yield alerts, so the
    strategy that starts from one exercises the code beyond `is this JSON`."""
    assert RECORDED[kind], f"no recorded {kind} bodies under tests/fixtures/{kind}"
    assert any(readable_alerts(kind, body) for body in RECORDED[kind])


def readable_alerts(kind: str, body: bytes) -> list:
    try:
        return PARSERS[kind](body, RECEIVED).alerts
    except PayloadError:  # a few recorded bodies are a sender's mistakes, kept on purpose
        return []


WEBHOOK_TOKEN = "fuzz-webhook-token-0123456789abcdef"


@pytest.fixture
def hooks(db):
    from incidents import services

    return {
        kind: services.integration_add(kind=kind, name=f"fuzz-{kind}", token=f"{WEBHOOK_TOKEN}-{kind}")[0]
        for kind in PARSERS
    }


@pytest.mark.django_db
@settings(
    max_examples=int(os.environ.get("ROOTLINE_FUZZ_EXAMPLES", "300")) // 3,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=list(HealthCheck),
)
@given(kind=st.sampled_from(sorted(PARSERS)), document=DOCUMENTS)
def test_no_body_gets_a_500_from_the_webhook(client, hooks, kind, document):
    integration = hooks[kind]
    response = client.post(
        integration.path,
        encoded(document),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {WEBHOOK_TOKEN}-{kind}",
    )
    assert response.status_code < 500, response.content[:300]
    assert response.json()  # every answer says what happened
