"""Hostile webhook bodies, each posted through the real URL: what the sender is told, what is kept.

Every case asserts the status (never a 500), the JSON answer and the exact path it names, the
stored Delivery row (a 400 keeps the body byte for byte so it can be replayed; a 413 keeps only
size and headers), and, after processing, that the good alerts beside the bad ones became Alert
rows. Bodies are written to break PostgreSQL too (NUL, lone surrogates), so run this module on
both databases.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from correlate.events import event_fingerprint, labelset_fingerprint
from incidents import services
from incidents.models import Alert, Delivery

TOKEN = "hostile-bodies-token-0123456789abcdef"
UTC = UTC
MISSING = object()
STARTS = "2026-11-29T02:00:00Z"
STARTS_AT = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)


# Bodies -----------------------------------------------------------------------------------


def labels(index: int = 0, **extra: object) -> dict:
    return {"alertname": "VLLMKVCacheHigh", "cluster": "c1", "pod": f"vllm-{index}", **extra}


def am_alert(index: int = 0, **fields: object) -> dict:
    """An Alertmanager alert as 0.25 sends it; a field given as MISSING is left out."""
    alert = {
        "status": "firing",
        "labels": labels(index),
        "annotations": {"summary": f"KV cache high on vllm-{index}"},
        "startsAt": STARTS,
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=vllm_kv_cache_usage",
        "fingerprint": f"fp-{index}",
    }
    for key, value in fields.items():
        if value is MISSING:
            alert.pop(key, None)
        else:
            alert[key] = value
    return alert


def am(*alerts: object, **top: object) -> bytes:
    document = {
        "receiver": "rootline",
        "status": "firing",
        "alerts": list(alerts),
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "version": "4",
        "groupKey": '{}:{alertname="VLLMKVCacheHigh"}',
        "truncatedAlerts": 0,
    }
    for key, value in top.items():
        if value is MISSING:
            document.pop(key, None)
        else:
            document[key] = value
    return json.dumps(document).encode()


def beside(bad: dict) -> bytes:
    """The bad alert at index 1, between two good ones (fp-0 and fp-2)."""
    return am(am_alert(0), bad, am_alert(2))


def grafana_alert(index: int = 0, **fields: object) -> dict:
    alert = {
        **am_alert(index),
        "dashboardURL": "http://grafana:3000/d/vllm",
        "panelURL": "http://grafana:3000/d/vllm?viewPanel=2",
        "silenceURL": "http://grafana:3000/alerting/silence/new",
        "values": {"B": 0.93, "C": 1},
        "valueString": "[ var='B' labels={pod=vllm-0} value=0.93 ]",
    }
    alert.update(fields)
    return alert


def grafana(*alerts: dict, **top: object) -> bytes:
    document = {
        "receiver": "rootline",
        "status": "firing",
        "orgId": 1,
        "alerts": list(alerts),
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://grafana:3000/",
        "version": "1",
        "groupKey": "{}:{}",
        "truncatedAlerts": 0,
        "title": "[FIRING:1] VLLMKVCacheHigh",
        "state": "alerting",
        "message": "KV cache high",
    }
    document.update(top)
    return json.dumps(document).encode()


def event(action: object = "trigger", *, dedup_key: object = "kv-vllm-0", **payload: object) -> dict:
    """A PagerDuty Events API v2 event; payload fields given as MISSING are left out."""
    body = {
        "routing_key": TOKEN,
        "event_action": action,
        "dedup_key": dedup_key,
        "payload": {
            "summary": "KV cache high on vllm-0",
            "source": "vllm-0",
            "severity": "warning",
            "component": "vllm",
            "group": "serving",
            "class": "VLLMKVCacheHigh",
        },
    }
    for key, value in payload.items():
        if value is MISSING:
            body["payload"].pop(key, None)
        else:
            body["payload"][key] = value
    if action is MISSING:
        del body["event_action"]
    if dedup_key is MISSING:
        del body["dedup_key"]
    return body


def change(**payload: object) -> dict:
    """A PagerDuty Change Event (no event_action, no dedup_key)."""
    fields = {
        "summary": "Deploy vllm 0.6.3",
        "timestamp": "2026-11-29T01:55:00Z",
        "source": "argocd",
        **payload,
    }
    return {
        "routing_key": TOKEN,
        "payload": {key: value for key, value in fields.items() if value is not MISSING},
    }


def js(document: object) -> bytes:
    return json.dumps(document).encode()


def ten_thousand_alerts() -> bytes:
    return am(*(am_alert(index) for index in range(10_000)))


# Cases ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    body: bytes | Callable[[], bytes]
    status: int
    kind: str = "alertmanager"
    path: str = ""  # 400: the path the error names
    rejected: tuple[str, ...] = ()  # 202: the exact paths of the rejected alerts, in order
    accepted: int = 0
    stored: tuple[str, ...] = ()  # 202: fingerprints of the Alert rows after processing
    check: Callable[[list[Alert]], None] | None = None
    token: str | None = None  # None: the integration's token; "": no Authorization header
    headers: dict[str, str] = field(default_factory=dict)
    max_body: int | None = None
    size: int = 0  # 413: the size the delivery keeps
    bug: str = ""  # a known bug outside the parsers: the case is a strict xfail until it is fixed

    def payload(self) -> bytes:
        return self.body() if callable(self.body) else self.body


def refused(id: str, body: bytes, path: str, *, kind: str = "alertmanager", **extra) -> Case:
    return Case(id, body, 400, kind=kind, path=path, **extra)


def partial(id: str, bad: dict, path: str, **extra) -> Case:
    return Case(id, beside(bad), 202, rejected=(path,), accepted=2, stored=("fp-0", "fp-2"), **extra)


def kept(
    id: str,
    body: bytes | Callable[[], bytes],
    *,
    stored: tuple[str, ...],
    accepted: int | None = None,
    **extra,
) -> Case:
    return Case(id, body, 202, accepted=len(stored) if accepted is None else accepted, stored=stored, **extra)


def one(fingerprint: str) -> Callable[[Callable[[Alert], None]], Callable[[list[Alert]], None]]:
    """Decorate a check of the single alert with this fingerprint."""

    def wrap(check: Callable[[Alert], None]) -> Callable[[list[Alert]], None]:
        def run(alerts: list[Alert]) -> None:
            check(next(alert for alert in alerts if alert.fingerprint == fingerprint))

        return run

    return wrap


@one("fp-1")
def annotation_nul_replaced(alert: Alert) -> None:
    assert alert.annotations["summary"] == "KV cache \ufffd high"


@one("fp-1")
def annotation_surrogate_replaced(alert: Alert) -> None:
    assert alert.annotations["summary"] == "KV cache \ufffd high"


@one("fp-1")
def annotation_truncated(alert: Alert) -> None:
    summary = alert.annotations["summary"]
    assert (
        summary.startswith("x" * 64 * 1024)
        and summary[64 * 1024 :] == "… [truncated, 102400 characters in all]"
    )


@one("fp-1")
def nine_fraction_digits(alert: Alert) -> None:
    assert alert.starts_at == datetime(2026, 11, 29, 2, 0, 0, 123456, tzinfo=UTC)


@one("fp-1")
def zero_time_timed_by_arrival(alert: Alert) -> None:
    assert alert.starts_at == alert.first_delivery.received_at


@one("fp-1")
def year_9999(alert: Alert) -> None:
    assert alert.starts_at == datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


@one("fp-1")
def offset_stored_in_utc(alert: Alert) -> None:
    assert alert.starts_at == datetime(2026, 11, 28, 20, 30, tzinfo=UTC)
    assert alert.starts_at.utcoffset().total_seconds() == 0


@one(labelset_fingerprint(labels(1)))
def fingerprint_computed(alert: Alert) -> None:
    assert alert.labels == labels(1)


@one("fp-1")
def control_characters_kept(alert: Alert) -> None:
    assert alert.labels["pod"] == "vllm-1\x1b[31m\r\n\t\x7f"


@one("fp-1")
def pair_of_escapes_is_one_character(alert: Alert) -> None:
    assert alert.labels["pod"] == "vllm-😀" and alert.annotations["summary"] == "東京 😀"


@one("fp-1")
def resolved_before_start_ends_at_start(alert: Alert) -> None:
    assert alert.status == "resolved" and alert.ends_at == alert.starts_at == STARTS_AT


def duplicates_collapse(alerts: list[Alert]) -> None:
    assert len(alerts) == 2 and next(a for a in alerts if a.fingerprint == "fp-0").status == "resolved"


def ten_thousand_stored(alerts: list[Alert]) -> None:
    assert len(alerts) == 10_000 and all(alert.status == "firing" for alert in alerts)


@one("fp-0")
def grafana_values_absent(alert: Alert) -> None:
    assert (
        "values" not in alert.annotations
        and alert.annotations["dashboardURL"] == "http://grafana:3000/d/vllm"
    )


@one("fp-0")
def grafana_values_kept(alert: Alert) -> None:
    assert json.loads(alert.annotations["values"]) == {"B": 0.93, "C": {"nested": [1, 2]}}


@one("fp-0")
def grafana_bad_link_dropped(alert: Alert) -> None:
    assert "dashboardURL" not in alert.annotations and alert.annotations["panelURL"].startswith("http://")


@one("kv-vllm-0")
def custom_details_flattened(alert: Alert) -> None:
    assert alert.labels == {
        "alertname": "VLLMKVCacheHigh",
        "load avg": "0.75",
        "replicas": "3",
        "ratio": "1e-05",
        "paged": "true",
        "pod": "vllm-0",
        "source": "vllm-0",
        "component": "vllm",
        "group": "serving",
        "class": "VLLMKVCacheHigh",
        "severity": "warning",
    }


@one("kv-vllm-0")
def timestamp_without_colon(alert: Alert) -> None:
    assert (
        alert.starts_at == datetime(2015, 7, 17, 8, 42, 58, 315000, tzinfo=UTC) and alert.status == "firing"
    )


@one(event_fingerprint(source="argocd", summary="Deploy vllm 0.6.3"))
def change_event_stored(alert: Alert) -> None:
    at = datetime(2026, 11, 29, 1, 55, tzinfo=UTC)
    assert (alert.kind, alert.status, alert.layer, alert.failure_mode) == (
        "change",
        "resolved",
        "process",
        "change",
    )
    assert alert.starts_at == alert.ends_at == at


@one(event_fingerprint(source="vllm-0", summary="KV cache high on vllm-0", component="vllm"))
def keyed_by_source_summary_component(alert: Alert) -> None:
    assert alert.alertname == "VLLMKVCacheHigh"


SMALL = am(am_alert(0))
BIG_GROUP = am(*(am_alert(index) for index in range(20)))

ALERTMANAGER = [
    # The body as a whole
    refused("truncated-json", SMALL[: len(SMALL) // 2], "body"),
    refused("truncated-after-last-brace", SMALL[:-1], "body"),
    refused("non-utf8-latin1-byte", SMALL.replace(b"vllm-0", b"vllm-\xe9"), "body"),
    refused("non-utf8-lone-continuation", b"\x80" + SMALL, "body"),
    refused("utf16-encoded", SMALL.decode().encode("utf-16"), "body"),
    refused("gzip-compressed", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + SMALL[:40], "body"),
    kept("utf8-bom", b"\xef\xbb\xbf" + SMALL, stored=("fp-0",)),
    refused("empty-body", b"", "body"),
    refused("whitespace-body", b" \r\n\t  \n", "body"),
    refused("top-level-null", b"null", "body"),
    refused("top-level-number", b"42", "body"),
    refused("top-level-huge-number", b"1" * 5000, "body"),
    refused("huge-number-beside-alerts", SMALL[:-1] + b', "x": ' + b"9" * 5000 + b"}", "body"),
    refused("top-level-string", b'"alerts"', "body"),
    refused("top-level-array", js([am_alert(0)]), "body"),
    refused("nested-10000-arrays", b"[" * 10_000, "body"),
    refused(
        "nested-10000-inside-an-alert",
        SMALL.replace(b'"endsAt"', b'"x": ' + b"[" * 10_000 + b"]" * 10_000 + b', "endsAt"'),
        "body",
    ),
    refused("raw-nul-byte-in-a-string", SMALL.replace(b"vllm-0", b"vllm\x00-0"), "body"),
    refused("alerts-an-object", am(alerts={"0": am_alert(0)}), "alerts"),
    refused("alerts-null", am(alerts=None), "alerts"),
    refused("alerts-missing", am(alerts=MISSING), "alerts"),
    kept("alerts-empty", am(), stored=()),
    refused("version-3", am(am_alert(0), version="3"), "version"),
    refused("version-a-number", am(am_alert(0), version=4), "version"),
    # One alert, unusable: nothing else in the body, so a 400 naming it
    refused("only-alert-not-an-object", am("oops"), "alerts[0]"),
    refused("only-alert-empty-labels", am(am_alert(0, labels={})), "alerts[0].labels"),
    refused(
        "all-alerts-bad-first-named",
        am(am_alert(0, startsAt="soon"), am_alert(1, labels=None)),
        "alerts[0].startsAt",
    ),
    # Bad alerts beside good ones: a 202 naming exactly the bad one
    Case(
        "alert-not-an-object",
        am(am_alert(0), 17, am_alert(2)),
        202,
        rejected=("alerts[1]",),
        accepted=2,
        stored=("fp-0", "fp-2"),
    ),
    partial("labels-an-array", am_alert(1, labels=["alertname", "X"]), "alerts[1].labels"),
    partial("labels-missing", am_alert(1, labels=MISSING), "alerts[1].labels"),
    partial("labels-empty", am_alert(1, labels={}), "alerts[1].labels"),
    partial("label-value-a-number", am_alert(1, labels=labels(1, pod=3)), "alerts[1].labels.pod"),
    partial("label-value-null", am_alert(1, labels=labels(1, pod=None)), "alerts[1].labels.pod"),
    partial(
        "label-value-an-object", am_alert(1, labels=labels(1, pod={"name": "vllm-1"})), "alerts[1].labels.pod"
    ),
    partial("label-value-a-boolean", am_alert(1, labels=labels(1, pod=True)), "alerts[1].labels.pod"),
    partial("annotations-an-array", am_alert(1, annotations=["summary"]), "alerts[1].annotations"),
    partial("nul-in-label-value", am_alert(1, labels=labels(1, pod="vllm\x00-1")), "alerts[1].labels.pod"),
    partial(
        "nul-in-label-name",
        am_alert(1, labels={**labels(1), "po\x00d": "vllm-1"}),
        "alerts[1].labels.po\\u0000d",
    ),
    partial("nul-in-fingerprint", am_alert(1, fingerprint="fp-\x001"), "alerts[1].fingerprint"),
    kept(
        "nul-in-annotation-kept-replaced",
        beside(am_alert(1, annotations={"summary": "KV cache \x00 high"})),
        stored=("fp-0", "fp-1", "fp-2"),
        check=annotation_nul_replaced,
    ),
    partial(
        "lone-surrogate-in-label-value",
        am_alert(1, labels=labels(1, pod="vllm-\ud800")),
        "alerts[1].labels.pod",
    ),
    partial(
        "lone-surrogate-in-label-name",
        am_alert(1, labels={**labels(1), "po\udc00d": "x"}),
        "alerts[1].labels.po\\udc00d",
    ),
    kept(
        "lone-surrogate-in-annotation-kept-replaced",
        beside(am_alert(1, annotations={"summary": "KV cache \ud800 high"})),
        stored=("fp-0", "fp-1", "fp-2"),
        check=annotation_surrogate_replaced,
    ),
    kept(
        "surrogate-pair-escapes-are-one-character",
        beside(am_alert(1, labels=labels(1, pod="vllm-😀"), annotations={"summary": "東京 😀"})),
        stored=("fp-0", "fp-1", "fp-2"),
        check=pair_of_escapes_is_one_character,
    ),
    kept(
        "control-characters-in-label-kept",
        beside(am_alert(1, labels=labels(1, pod="vllm-1\x1b[31m\r\n\t\x7f"))),
        stored=("fp-0", "fp-1", "fp-2"),
        check=control_characters_kept,
    ),
    partial("label-value-100kb", am_alert(1, labels=labels(1, pod="x" * 100 * 1024)), "alerts[1].labels.pod"),
    partial(
        "label-name-2000-characters",
        am_alert(1, labels={**labels(1), "n" * 2000: "x"}),
        "alerts[1].labels." + "n" * 80,
    ),
    kept(
        "annotation-100kb-kept-truncated",
        beside(am_alert(1, annotations={"summary": "x" * 100 * 1024})),
        stored=("fp-0", "fp-1", "fp-2"),
        check=annotation_truncated,
    ),
    partial("fingerprint-300-characters", am_alert(1, fingerprint="f" * 300), "alerts[1].fingerprint"),
    partial("fingerprint-a-number", am_alert(1, fingerprint=12345), "alerts[1].fingerprint"),
    kept(
        "fingerprint-missing-computed-like-alertmanager",
        beside(am_alert(1, fingerprint=MISSING)),
        stored=("fp-0", labelset_fingerprint(labels(1)), "fp-2"),
        check=fingerprint_computed,
    ),
    partial("startsat-missing", am_alert(1, startsAt=MISSING), "alerts[1].startsAt"),
    partial("startsat-a-number", am_alert(1, startsAt=1764381600), "alerts[1].startsAt"),
    partial("startsat-null", am_alert(1, startsAt=None), "alerts[1].startsAt"),
    partial("startsat-garbage", am_alert(1, startsAt="yesterday at noon"), "alerts[1].startsAt"),
    partial("startsat-without-offset", am_alert(1, startsAt="2026-11-29T02:00:00"), "alerts[1].startsAt"),
    kept(
        "startsat-zero-time-timed-by-arrival",
        beside(am_alert(1, startsAt="0001-01-01T00:00:00Z")),
        stored=("fp-0", "fp-1", "fp-2"),
        check=zero_time_timed_by_arrival,
    ),
    partial("startsat-month-13", am_alert(1, startsAt="2026-13-01T02:00:00Z"), "alerts[1].startsAt"),
    partial("startsat-february-30", am_alert(1, startsAt="2026-02-30T02:00:00Z"), "alerts[1].startsAt"),
    partial(
        "startsat-offset-out-of-range",
        am_alert(1, startsAt="2026-11-29T02:00:00+99:99"),
        "alerts[1].startsAt",
    ),
    partial(
        "startsat-year-9999-overflows-utc",
        am_alert(1, startsAt="9999-12-31T23:59:59-05:00"),
        "alerts[1].startsAt",
    ),
    partial("startsat-before-1970", am_alert(1, startsAt="1969-12-31T23:59:59Z"), "alerts[1].startsAt"),
    kept(
        "startsat-nine-fraction-digits",
        beside(am_alert(1, startsAt="2026-11-29T02:00:00.123456789Z")),
        stored=("fp-0", "fp-1", "fp-2"),
        check=nine_fraction_digits,
    ),
    kept(
        "startsat-offset-0530-stored-in-utc",
        beside(am_alert(1, startsAt="2026-11-29T02:00:00+05:30")),
        stored=("fp-0", "fp-1", "fp-2"),
        check=offset_stored_in_utc,
    ),
    partial("endsat-garbage-on-resolved", am_alert(1, status="resolved", endsAt="later"), "alerts[1].endsAt"),
    partial(
        "endsat-an-object-on-resolved", am_alert(1, status="resolved", endsAt={"t": 1}), "alerts[1].endsAt"
    ),
    kept(
        "endsat-before-startsat-on-resolved",
        beside(am_alert(1, status="resolved", endsAt="2026-11-29T01:00:00Z")),
        stored=("fp-0", "fp-1", "fp-2"),
        check=resolved_before_start_ends_at_start,
    ),
    partial("status-pending", am_alert(1, status="pending"), "alerts[1].status"),
    partial("status-a-list", am_alert(1, status=["firing"]), "alerts[1].status"),
    kept(
        "duplicate-alerts-in-one-body",
        am(
            am_alert(0),
            am_alert(0),
            am_alert(0, status="resolved", endsAt="2026-11-29T02:05:00Z"),
            am_alert(1),
            am_alert(1),
        ),
        stored=("fp-0", "fp-1"),
        accepted=5,
        check=duplicates_collapse,
    ),
    kept(
        "same-occurrence-written-with-two-offsets",
        am(
            am_alert(0),
            am_alert(0, startsAt="2026-11-29T07:30:00+05:30", annotations={"summary": "second view"}),
        ),
        stored=("fp-0",),
        accepted=2,
    ),
    kept(
        "same-occurrence-differing-in-nanoseconds",
        am(
            am_alert(0, startsAt="2026-11-29T02:00:00.123456789Z"),
            am_alert(0, startsAt="2026-11-29T02:00:00.123456001Z"),
        ),
        stored=("fp-0",),
        accepted=2,
    ),
    kept(
        "startsat-year-9999",
        beside(am_alert(1, startsAt="9999-12-31T23:59:59.999999999Z")),
        stored=("fp-0", "fp-1", "fp-2"),
        check=year_9999,
    ),
    kept(
        "ten-thousand-alerts",
        ten_thousand_alerts,
        stored=tuple(f"fp-{index}" for index in range(10_000)),
        check=ten_thousand_stored,
    ),
    Case(
        "mixed-good-and-bad",
        am(
            am_alert(0),
            am_alert(1, startsAt="nope"),
            am_alert(2),
            am_alert(3, labels=labels(3, severity=5)),
            "not an alert",
            am_alert(5, status="pending"),
            am_alert(6),
        ),
        202,
        rejected=("alerts[1].startsAt", "alerts[3].labels.severity", "alerts[4]", "alerts[5].status"),
        accepted=3,
        stored=("fp-0", "fp-2", "fp-6"),
    ),
    # Size and credentials
    Case("body-over-the-limit", BIG_GROUP, 413, max_body=1024, size=len(BIG_GROUP)),
    Case("huge-content-length-small-body", SMALL, 413, headers={"CONTENT_LENGTH": str(10**12)}, size=10**12),
    Case(
        "absurd-content-length-small-body", SMALL, 413, headers={"CONTENT_LENGTH": "9" * 30}, size=2**63 - 1
    ),
    Case("wrong-token", SMALL, 401, token="not-the-token"),
    Case("missing-token", SMALL, 401, token=""),
]

GRAFANA = [
    kept(
        "grafana-values-null",
        grafana(grafana_alert(0, values=None)),
        kind="grafana",
        stored=("fp-0",),
        check=grafana_values_absent,
    ),
    kept(
        "grafana-values-a-map",
        grafana(grafana_alert(0, values={"B": 0.93, "C": {"nested": [1, 2]}})),
        kind="grafana",
        stored=("fp-0",),
        check=grafana_values_kept,
    ),
    kept(
        "grafana-values-a-string",
        grafana(grafana_alert(0, values="B=0.93")),
        kind="grafana",
        stored=("fp-0",),
        check=grafana_values_absent,
    ),
    kept(
        "grafana-dashboard-url-a-number",
        grafana(grafana_alert(0, dashboardURL=7)),
        kind="grafana",
        stored=("fp-0",),
        check=grafana_bad_link_dropped,
    ),
    refused("grafana-version-2", grafana(grafana_alert(0), version="2"), "version", kind="grafana"),
    refused("grafana-alerts-missing", js({"version": "1", "status": "firing"}), "alerts", kind="grafana"),
    refused("grafana-top-level-array", js([grafana_alert(0)]), "body", kind="grafana"),
    Case(
        "grafana-good-beside-bad",
        grafana(grafana_alert(0), grafana_alert(1, labels=labels(1, pod=None)), grafana_alert(2)),
        202,
        kind="grafana",
        rejected=("alerts[1].labels.pod",),
        accepted=2,
        stored=("fp-0", "fp-2"),
    ),
]

PD_DOCS_TRIGGER = {
    "payload": {
        "summary": "Example alert on host1.example.com",
        "timestamp": "2015-07-17T08:42:58.315+0000",
        "source": "monitoringtool:cloudvendor:central-region-dc-01:852559987:cluster/api-stats-prod-003",
        "severity": "info",
        "component": "postgres",
        "group": "prod-datapipe",
        "class": "deploy",
        "custom_details": {"ping time": "1500ms", "load avg": 0.75},
    },
    "routing_key": TOKEN,
    "dedup_key": "samplekeyhere",
    "event_action": "trigger",
}

EVENTS = [
    refused("events-top-level-string", b'"trigger"', "body", kind="events"),
    refused("events-top-level-number", b"3.14", "body", kind="events"),
    refused("events-top-level-null", b"null", "body", kind="events"),
    refused("events-truncated", js(event())[:-3], "body", kind="events"),
    refused("events-event-action-missing", js(event(MISSING)), "event_action", kind="events"),
    refused(
        "events-event-action-missing-payload-null",
        js(event(MISSING) | {"payload": None}),
        "payload",
        kind="events",
    ),
    refused(
        "events-event-action-and-payload-missing",
        js({"routing_key": TOKEN, "dedup_key": "k"}),
        "event_action",
        kind="events",
    ),
    refused("events-event-action-unknown", js(event("escalate")), "event_action", kind="events"),
    refused("events-event-action-a-number", js(event(1)), "event_action", kind="events"),
    refused("events-trigger-without-summary", js(event(summary=MISSING)), "payload.summary", kind="events"),
    refused(
        "events-acknowledge-without-dedup-key",
        js(event("acknowledge", dedup_key=MISSING)),
        "dedup_key",
        kind="events",
    ),
    refused(
        "events-resolve-without-dedup-key", js(event("resolve", dedup_key="")), "dedup_key", kind="events"
    ),
    refused("events-payload-a-string", js(event() | {"payload": "KV cache high"}), "payload", kind="events"),
    refused("events-payload-an-array", js(event() | {"payload": [1]}), "payload", kind="events"),
    refused("events-nul-in-dedup-key", js(event(dedup_key="kv\x00-0")), "dedup_key", kind="events"),
    refused("events-dedup-key-300-characters", js(event(dedup_key="k" * 300)), "dedup_key", kind="events"),
    refused(
        "events-lone-surrogate-in-source", js(event(source="vllm-\ud800")), "payload.source", kind="events"
    ),
    refused(
        "events-nul-in-custom-details-key",
        js(event(custom_details={"po\x00d": "vllm-0"})),
        "payload.custom_details",
        kind="events",
    ),
    refused("events-timestamp-garbage", js(event(timestamp="tomorrow")), "payload.timestamp", kind="events"),
    refused("events-nested-10000", b'{"payload": ' + b"[" * 10_000, "body", kind="events"),
    kept(
        "events-custom-details-nested-and-numbers",
        js(
            event(
                custom_details={
                    "alertname": "VLLMKVCacheHigh",
                    "load avg": 0.75,
                    "replicas": 3,
                    "ratio": 1e-5,
                    "paged": True,
                    "empty": None,
                    "pod": "vllm-0",
                    "nested": {"a": {"b": 1}},
                    "list": [1, 2],
                }
            )
        ),
        kind="events",
        stored=("kv-vllm-0",),
        check=custom_details_flattened,
    ),
    kept(
        "events-timestamp-offset-without-colon",
        js(event(timestamp="2015-07-17T08:42:58.315+0000")),
        kind="events",
        stored=("kv-vllm-0",),
        check=timestamp_without_colon,
    ),
    kept("events-pagerduty-docs-trigger", js(PD_DOCS_TRIGGER), kind="events", stored=("samplekeyhere",)),
    kept(
        "events-trigger-without-dedup-key",
        js(event(dedup_key=MISSING)),
        kind="events",
        stored=(event_fingerprint(source="vllm-0", summary="KV cache high on vllm-0", component="vllm"),),
        check=keyed_by_source_summary_component,
    ),
    kept(
        "events-acknowledge-of-nothing-firing", js(event("acknowledge")), kind="events", stored=(), accepted=1
    ),
    Case(
        "events-batch-with-one-bad-event",
        js(
            [
                event(dedup_key="kv-vllm-0"),
                event("escalate", dedup_key="kv-vllm-1"),
                event(dedup_key="kv-vllm-2"),
            ]
        ),
        202,
        kind="events",
        rejected=("[1].event_action",),
        accepted=2,
        stored=("kv-vllm-0", "kv-vllm-2"),
    ),
    Case(
        "events-batch-with-a-non-object",
        js([event(), "trigger"]),
        202,
        kind="events",
        rejected=("[1]",),
        accepted=1,
        stored=("kv-vllm-0",),
    ),
    refused("events-batch-all-bad", js([event(summary=MISSING), 5]), "[0].payload.summary", kind="events"),
    kept("events-batch-empty", b"[]", kind="events", stored=()),
    kept(
        "events-change-event",
        js(change()),
        kind="events",
        stored=(event_fingerprint(source="argocd", summary="Deploy vllm 0.6.3"),),
        check=change_event_stored,
    ),
    refused(
        "events-change-event-without-summary", js(change(summary=MISSING)), "payload.summary", kind="events"
    ),
    kept("events-routing-key-as-token", js(event()), kind="events", token="", stored=("kv-vllm-0",)),
    Case("events-routing-key-wrong", js(event() | {"routing_key": "nope"}), 401, kind="events", token=""),
    Case(
        "events-no-token-no-routing-key",
        js({k: v for k, v in event().items() if k != "routing_key"}),
        401,
        kind="events",
        token="",
    ),
    Case("events-no-token-non-utf8", b'{"routing_key": "\xff\xfe"}', 401, kind="events", token=""),
    Case("events-no-token-nested-10000", b"[" * 10_000, 401, kind="events", token=""),
    Case(
        "events-wrong-bearer-token", js(event() | {"routing_key": "nope"}), 401, kind="events", token="nope"
    ),
]

CASES = ALERTMANAGER + GRAFANA + EVENTS
PARAMS = [
    pytest.param(
        case,
        id=case.id,
        marks=[pytest.mark.xfail(strict=True, reason=f"BUG: {case.bug}")] if case.bug else [],
    )
    for case in CASES
]


# The test ---------------------------------------------------------------------------------


def names_path(error: str, path: str) -> bool:
    """The message names exactly this path: at its start or after a colon, followed by one."""
    return error.startswith(f"{path}: ") or f": {path}: " in error


@pytest.mark.django_db
@pytest.mark.parametrize("case", PARAMS)
def test_hostile_body_is_answered_precisely_and_never_500(
    case: Case, make_integration, post_hook, settings, django_capture_on_commit_callbacks
):
    if case.max_body is not None:
        settings.MAX_BODY = case.max_body
    integration = make_integration(case.kind, token=TOKEN)
    body = case.payload()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post_hook(integration, body, token=case.token, **case.headers)

    assert response.status_code == case.status, response.content[:600]
    assert response["Content-Type"] == "application/json"
    answer = response.json()
    if case.status == 202:
        assert_kept(case, answer, body, callbacks)
    elif case.status == 400:
        assert_refused(case, answer, body, callbacks)
    elif case.status == 413:
        assert_too_large(case, answer, callbacks)
    else:
        assert case.status == 401
        assert "token" in answer["error"] and set(answer) == {"error"}
        assert not Delivery.objects.exists() and callbacks == []


def assert_kept(case: Case, answer: dict, body: bytes, callbacks: list) -> None:
    assert set(answer) == {"accepted", "rejected", "delivery"}
    assert answer["accepted"] == case.accepted
    assert [rejection["path"] for rejection in answer["rejected"]] == list(case.rejected)
    assert all(set(rejection) == {"path", "error"} and rejection["error"] for rejection in answer["rejected"])
    delivery = Delivery.objects.get(pk=answer["delivery"])
    assert bytes(delivery.body) == body and delivery.size == len(body) and delivery.error == ""
    if case.accepted:
        assert delivery.status == Delivery.Status.PENDING and len(callbacks) == 1
        services.delivery_process(delivery_id=delivery.pk)
        delivery.refresh_from_db()
    else:
        assert callbacks == []
    assert delivery.status == Delivery.Status.PROCESSED
    assert (delivery.accepted, delivery.rejected) == (answer["accepted"], answer["rejected"])
    alerts = list(Alert.objects.order_by("id"))
    assert sorted(alert.fingerprint for alert in alerts) == sorted(case.stored)
    assert all(alert.first_delivery_id == delivery.pk for alert in alerts)
    if case.check:
        case.check(alerts)


def assert_refused(case: Case, answer: dict, body: bytes, callbacks: list) -> None:
    assert set(answer) <= {"error", "delivery", "rejected"}
    assert names_path(answer["error"], case.path), answer["error"]
    assert all(set(rejection) == {"path", "error"} for rejection in answer.get("rejected", []))
    delivery = Delivery.objects.get(pk=answer["delivery"])
    assert delivery.status == Delivery.Status.REJECTED and delivery.error == answer["error"]
    assert bytes(delivery.body) == body and delivery.size == len(body)
    assert callbacks == [] and not Alert.objects.exists()
    replayed = services.delivery_replay(delivery_id=delivery.pk)
    assert replayed.status == Delivery.Status.REJECTED and replayed.error == answer["error"]


def assert_too_large(case: Case, answer: dict, callbacks: list) -> None:
    assert set(answer) == {"error", "delivery"} and "over the limit" in answer["error"]
    delivery = Delivery.objects.get(pk=answer["delivery"])
    assert delivery.status == Delivery.Status.TOO_LARGE and delivery.size == case.size
    assert bytes(delivery.body) == b"" and delivery.body_digest == ""
    assert delivery.headers["content-type"] == "application/json"
    assert delivery.headers["authorization"] == "[redacted]"
    assert callbacks == [] and not Alert.objects.exists()


def test_corpus_is_large_and_ids_unique() -> None:
    assert len(CASES) >= 45
    assert len({case.id for case in CASES}) == len(CASES)
