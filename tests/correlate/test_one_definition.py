"""One definition per rule: an alert's cluster, Go's zero time and a change as the engine reads
it are each defined once, and every reader agrees (the strict webhook parser, the engine's file
reader, the batch's shares, the app's correlation key)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from correlate import io as engine_io
from correlate.batch import cluster_of as batch_cluster
from correlate.events import Alert, change_labels, is_zero_time
from correlate.ingest import parser_for
from correlate.topology import cluster_of, scope_of
from incidents.services.correlation.keys import correlation_key_of

RECEIVED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "labels, cluster",
    [
        ({"cluster": " prod-eu "}, "prod-eu"),
        ({"k8s_cluster": "gpu-a\t"}, "gpu-a"),
        ({"cluster": "", "cluster_name": " b"}, "b"),
        ({"namespace": "llm"}, ""),
    ],
)
def test_every_reader_takes_the_same_cluster(labels, cluster):
    alert = Alert(fingerprint="f", starts_at=RECEIVED, labels={"alertname": "X", **labels})
    assert (
        cluster_of(labels)
        == batch_cluster(alert)
        == correlation_key_of(labels)
        == scope_of(alert.labels).cluster
        == cluster
    )


@pytest.mark.parametrize(
    "text, zero",
    [
        ("0001-01-01T00:00:00Z", True),
        ("0001-01-01T00:00:00+02:00", True),
        ("0001-06-30T12:00:00Z", True),
        ("2026-12-01T11:00:00Z", False),
    ],
)
def test_the_strict_parser_and_the_file_reader_agree_on_zero_time(text, zero):
    body = {"version": "4", "alerts": [{"status": "firing", "labels": {"alertname": "X"}, "startsAt": text}]}
    [parsed] = parser_for("alertmanager")(json.dumps(body).encode(), RECEIVED).alerts
    assert (parsed.starts_at == RECEIVED) is zero  # a zero start is timed by arrival
    assert (engine_io.parse_time(text) is None) is zero
    if not zero:
        assert not is_zero_time(parsed.starts_at)


def test_a_change_reads_as_a_process_change_whatever_its_labels_say():
    assert change_labels({"layer": "engine", "failure_mode": "oom", "cluster": "c"}) == {
        "layer": "process",
        "failure_mode": "change",
        "cluster": "c",
    }
