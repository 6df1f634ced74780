import json
import subprocess
import sys
from pathlib import Path

from correlate.events import event_fingerprint
from correlate.io import alerts_from_body, parse_time, read_alerts
from correlate.testing import clock

ROOT = Path(__file__).resolve().parents[2]
POD = "vllm-llama-7d9f8b6c5d-x2k4p"


def am_body(status, alerts):
    return {"version": "4", "status": status, "receiver": "rootline", "groupKey": "{}:{}", "alerts": alerts}


def am_alert(name, starts, status="firing", ends="0001-01-01T00:00:00Z", fp=None, **labels):
    return {
        "status": status,
        "labels": {"alertname": name, "cluster": "prod-a", "namespace": "llm", **labels},
        "annotations": {},
        "startsAt": starts,
        "endsAt": ends,
        "generatorURL": "",
        "fingerprint": fp or name.lower()[:16],
    }


def change_body(summary, at, **details):
    return {
        "routing_key": "x",
        "payload": {"summary": summary, "source": "argocd", "timestamp": at, "custom_details": details},
    }


def write_stream(tmp_path):
    alerts = tmp_path / "alerts.jsonl"
    lines = [
        am_body("firing", [am_alert("LLMContainerOOMKilled", "2026-03-14T02:00:00.123456789Z", pod=POD)]),
        am_body("firing", [am_alert("LLMContainerOOMKilled", "2026-03-14T02:00:00.123456789Z", pod=POD)]),
        am_body("firing", [am_alert("KubePodCrashLooping", "2026-03-14T02:03:00Z", pod=POD)]),
        am_body(
            "resolved",
            [
                am_alert(
                    "LLMContainerOOMKilled",
                    "2026-03-14T02:00:00.123456789Z",
                    "resolved",
                    "2026-03-14T02:09:00Z",
                    pod=POD,
                )
            ],
        ),
    ]
    alerts.write_text("\n".join(json.dumps(b) for b in lines) + "\nnot json\n")
    changes = tmp_path / "changes.jsonl"
    changes.write_text(
        json.dumps(
            change_body(
                "Deploy vllm-llama v2",
                "2026-03-14T01:45:00.000+0000",
                cluster="prod-a",
                namespace="llm",
                deployment="vllm-llama",
            )
        )
        + "\n"
    )
    return alerts, changes


def test_times_with_nanoseconds_and_pagerduty_offsets_parse():
    assert parse_time("2026-03-14T02:00:00.123456789Z").microsecond == 123456
    assert parse_time("2026-03-14T01:45:00.000+0000") == clock("01:45")
    assert parse_time("0001-01-01T00:00:00Z") is None


def test_reader_dedupes_occurrences_and_keeps_the_resolution(tmp_path):
    alerts_path, _ = write_stream(tmp_path)
    alerts = read_alerts([alerts_path])
    assert len(alerts) == 2
    oom = next(a for a in alerts if a.alertname == "LLMContainerOOMKilled")
    assert oom.status == "resolved" and oom.ends_at == clock("02:09")


def pd_event(action, dedup_key, at, summary="LLM gateway 5xx above 5%", **details):
    return {
        "routing_key": "x",
        "event_action": action,
        "dedup_key": dedup_key,
        "payload": {
            "summary": summary,
            "source": "checkly",
            "severity": "critical",
            "timestamp": at,
            "custom_details": details,
        },
    }


def test_events_api_triggers_are_firing_alerts_and_a_resolve_ends_them(tmp_path):
    """Read as the app reads them (correlate/ingest/events.py), not as changes: a trigger fires
    under its dedup_key, a resolve (its own time) ends the occurrence it names."""
    stream = tmp_path / "events.jsonl"
    stream.write_text(
        "\n".join(
            json.dumps(body)
            for body in [
                pd_event("trigger", "check-syd", "2026-03-14T02:00:00Z", model="support-bot"),
                [
                    pd_event("acknowledge", "check-syd", "2026-03-14T02:02:00Z"),
                    pd_event("trigger", "check-tyo", "2026-03-14T02:01:00Z"),
                ],
                pd_event("resolve", "check-syd", "2026-03-14T02:10:00Z"),
                pd_event("resolve", "never-fired", "2026-03-14T02:11:00Z"),
            ]
        )
        + "\n"
    )
    alerts = {alert.fingerprint: alert for alert in read_alerts([stream])}  # the acknowledge opened nothing
    assert sorted(alerts) == ["check-syd", "check-tyo"]
    syd = alerts["check-syd"]
    assert syd.status == "resolved" and syd.ends_at == clock("02:10") and syd.starts_at == clock("02:00")
    assert syd.labels["model"] == "support-bot" and syd.labels["severity"] == "critical"
    assert "failure_mode" not in syd.labels  # not a change
    assert alerts["check-tyo"].status == "firing"


def test_an_alert_event_that_lost_its_action_is_skipped_not_read_as_a_change():
    lost = pd_event("trigger", "check-syd", "2026-03-14T02:00:00Z")
    del lost["event_action"]
    assert alerts_from_body(lost) == []


def test_change_events_are_keyed_like_the_app_keys_them():
    [change] = alerts_from_body(change_body("Deploy vllm-llama v2", "2026-03-14T01:45:00Z", cluster="prod-a"))
    assert change.fingerprint == event_fingerprint(
        source="argocd", summary="Deploy vllm-llama v2", component=""
    )
    assert change.labels["failure_mode"] == "change" and change.labels["cluster"] == "prod-a"
    assert change.starts_at == clock("01:45")


def test_cli_prints_truth_shaped_incidents_with_root_candidates(tmp_path):
    alerts_path, changes_path = write_stream(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "correlate", str(alerts_path), "--changes", str(changes_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(result.stdout)
    [incident] = doc["incidents"]
    assert len(incident["alerts"]) == 3
    assert set(incident["root"]) == {"fingerprint", "starts_at"}
    assert incident["root"]["fingerprint"] == event_fingerprint(
        source="argocd", summary="Deploy vllm-llama v2"
    )
    assert incident["root_candidates"][0]["explanation"]
    assert 0 < incident["root_candidates"][0]["confidence"] <= 1
