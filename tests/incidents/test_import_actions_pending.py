"""`import_actions` before `import_alerts` (the contract lets the three imports run in any order):
a line whose alerts are not stored, or not correlated, yet is kept pending and applied once they
are, by the next `import_alerts` or the periodic task, with the result the other order gives. A
line that is wrong in itself fails at once, and a pending one that cannot be applied when its
alerts arrive keeps its error where a person sees it."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from incidents.models import Alert, Decision, Delivery, Incident, IncidentAction, PendingAction
from incidents.replay import pending_actions_apply
from incidents.tasks import apply_pending_actions, correlate_key, process_delivery
from tests.incidents.conftest import DAY, SIBLINGS, am_body, cascade
from tests.incidents.test_actions_audit import snapshot

pytestmark = pytest.mark.django_db


def run(command: str, *args: str, folder: Path) -> tuple[dict, str]:
    out, err = folder / "out", folder / "err"
    call_command(command, *args, stdout=open(out, "w"), stderr=open(err, "w"))
    return json.loads(out.read_text()), err.read_text()


def action_lines() -> list[dict]:
    """The stored cascade's human actions, naming alerts by fingerprint as an exported file does."""

    def fingerprint(name: str, pod: str | None = None) -> str:
        rows = Alert.objects.filter(alertname=name)
        return (rows.get(labels__pod=pod) if pod else rows.get()).fingerprint

    oom, ttft, disk = (
        fingerprint("LLMContainerOOMKilled"),
        fingerprint("LLMTTFTP99High"),
        fingerprint("NodeDiskFilling"),
    )
    return [
        {"at": f"{DAY}T02:06:00Z", "by": "ana", "action": "acknowledge", "fingerprint": oom},
        {"at": f"{DAY}T02:08:00Z", "by": "ana", "action": "note", "text": "frag again", "fingerprint": oom},
        {
            "at": f"{DAY}T02:11:00Z",
            "by": "ben",
            "action": "false_positive",
            "fingerprint": fingerprint("VLLMRequestQueueHigh", SIBLINGS[0]),
        },
        {"at": f"{DAY}T02:12:00Z", "by": "ben", "action": "exclude_alert", "fingerprint": ttft},
        {
            "at": f"{DAY}T02:14:00Z",
            "by": "ana",
            "action": "merge",
            "fingerprint": disk,
            "into_fingerprint": oom,
        },
    ]


@pytest.fixture
def files(make_integration, deliver, tmp_path) -> tuple[int, Path, Path, dict, list[dict]]:
    """The alerts and actions files, what importing them alerts first gives, and the action lines;
    then a database without the alerts, their incidents, actions or deliveries."""
    integration = make_integration()
    for row in cascade():
        assert deliver(integration, am_body(row)).status_code == 202
    alerts, actions = tmp_path / "alerts.jsonl", tmp_path / "actions.jsonl"
    alerts.write_bytes(b"\n".join(am_body(row) for row in cascade()) + b"\n")
    lines = action_lines()
    actions.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert run("import_actions", str(actions), folder=tmp_path)[0]["applied"] == len(lines)
    in_order = snapshot()
    for model in (Incident, Alert, Delivery, Decision):
        model.objects.all().delete()
    assert not IncidentAction.objects.exists()
    return integration.pk, alerts, actions, in_order, lines


def deliveries_processed(django_capture_on_commit_callbacks, *, correlated: bool) -> None:
    """What the worker does with the stored deliveries, then (with `correlated`) with their alerts."""
    with django_capture_on_commit_callbacks(execute=False):
        for delivery in Delivery.objects.filter(status="pending").order_by("pk"):
            process_delivery(delivery.pk)
    if correlated:
        for key in sorted(
            set(Alert.objects.filter(correlated=False).values_list("correlation_key", flat=True))
        ):
            correlate_key(key)


@pytest.mark.parametrize("applied_by", ["the next import_alerts", "the periodic task"])
def test_actions_imported_before_their_alerts_are_kept_and_applied_once_the_alerts_are_correlated(
    files, tmp_path, django_capture_on_commit_callbacks, applied_by
):
    integration, alerts, actions, in_order, _ = files
    totals, err = run("import_actions", str(actions), folder=tmp_path)
    assert totals == {"applied": 0, "already": 0, "pending": 5, "failed": 0}, err
    assert err.splitlines()[0].startswith("actions.jsonl:1: pending: no alert ")
    assert not IncidentAction.objects.exists() and PendingAction.objects.count() == 5
    with django_capture_on_commit_callbacks(execute=False):
        run("import_alerts", str(alerts), "--integration", str(integration), folder=tmp_path)
    deliveries_processed(django_capture_on_commit_callbacks, correlated=False)
    assert apply_pending_actions() == {
        "applied": 0,
        "already": 0,
        "pending": 5,
        "failed": 0,
        "expired": 0,
    }  # stored, not yet correlated
    assert "not correlated into an incident yet" in PendingAction.objects.first().waiting_for

    deliveries_processed(django_capture_on_commit_callbacks, correlated=True)
    if applied_by == "the periodic task":
        assert apply_pending_actions() == {
            "applied": 5,
            "already": 0,
            "pending": 0,
            "failed": 0,
            "expired": 0,
        }
    else:
        with django_capture_on_commit_callbacks(execute=False):
            _, err = run("import_alerts", str(alerts), "--integration", str(integration), folder=tmp_path)
        assert "pending actions: 5 applied" in err
    assert snapshot() == in_order and not PendingAction.objects.exists()
    assert run("import_actions", str(actions), folder=tmp_path)[0] == {
        "applied": 0,
        "already": 5,
        "pending": 0,
        "failed": 0,
    }


def test_a_pending_action_that_cannot_be_applied_when_its_alerts_arrive_keeps_its_error(
    files, tmp_path, django_capture_on_commit_callbacks
):
    integration, alerts, actions, _, lines = files
    first = lines[0]
    actions.write_text("\n".join(json.dumps(line) for line in (first, {**first, "at": f"{DAY}T02:07:00Z"})))
    assert run("import_actions", str(actions), folder=tmp_path)[0]["pending"] == 2
    with django_capture_on_commit_callbacks(execute=False):
        run("import_alerts", str(alerts), "--integration", str(integration), folder=tmp_path)
    deliveries_processed(django_capture_on_commit_callbacks, correlated=True)
    with django_capture_on_commit_callbacks(execute=False):
        _, err = run("import_alerts", str(alerts), "--integration", str(integration), folder=tmp_path)
    assert "pending actions: 1 applied, 1 failed" in err
    assert "actions.jsonl:2: " in err and "already acknowledged" in err
    failed = PendingAction.objects.get()
    assert (
        failed.source == "actions.jsonl:2"
        and failed.failed_at is not None
        and "already acknowledged" in failed.error
    )
    assert apply_pending_actions() == {
        "applied": 0,
        "already": 0,
        "pending": 0,
        "failed": 0,
        "expired": 0,
    }  # not tried again
    assert IncidentAction.objects.filter(action="acknowledge").count() == 1


def test_a_line_wrong_in_itself_fails_at_once_even_before_its_alerts_arrive(files, tmp_path, users):
    _, _, actions, _, lines = files
    users("vic", "viewer")
    first = lines[0]
    tomorrow = (timezone.now() + timedelta(days=1)).isoformat().replace("+00:00", "Z")
    wrong = [
        {**first, "at": tomorrow},
        {**first, "when": "now"},
        {**first, "by": "vic"},
        {**first, "at": "02:06"},
        first,
    ]
    actions.write_text("\n".join(json.dumps(line) for line in wrong))
    totals, err = run("import_actions", str(actions), folder=tmp_path)
    assert totals == {"applied": 0, "already": 0, "pending": 1, "failed": 4}, err
    assert "actions.jsonl:1: at: " in err and "in the future" in err
    assert "actions.jsonl:2: when: not a field of acknowledge" in err
    assert "actions.jsonl:3: this needs the responder role" in err
    assert "actions.jsonl:4: at: " in err
    assert list(PendingAction.objects.values_list("source", flat=True)) == ["actions.jsonl:5"]


def test_kept_actions_are_applied_by_a_named_task_on_beat(settings):
    assert apply_pending_actions.name == "incidents.apply_pending_actions"
    assert {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()} >= {
        "incidents.apply_pending_actions"
    }


def listed_pending(folder: Path) -> list[dict]:
    out = folder / "listed"
    call_command("import_actions", "--pending", stdout=open(out, "w"))
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_a_kept_action_whose_alerts_never_arrive_expires_after_the_limit_naming_them_and_is_not_tried_again(
    files, tmp_path, settings, caplog
):
    _, _, actions, _, lines = files
    settings.PENDING_ACTION_TTL_HOURS = 24
    assert run("import_actions", str(actions), folder=tmp_path)[0]["pending"] == 5
    kept_at = PendingAction.objects.earliest("kept_at").kept_at
    waiting = {"applied": 0, "already": 0, "pending": 5, "failed": 0, "expired": 0}
    assert pending_actions_apply(now=kept_at + timedelta(hours=23, minutes=59)) == waiting
    assert {row["state"] for row in listed_pending(tmp_path)} == {"waiting"}

    with caplog.at_level(logging.WARNING, logger="incidents.replay"):
        totals = pending_actions_apply(now=kept_at + timedelta(hours=24, seconds=1))
    assert totals == {"applied": 0, "already": 0, "pending": 0, "failed": 0, "expired": 5}
    merge = PendingAction.objects.get(source="actions.jsonl:5")
    assert merge.state == "expired" and merge.expired_at == kept_at + timedelta(hours=24, seconds=1)
    assert "did not arrive within 24 h" in merge.error
    for fingerprint in (lines[4]["fingerprint"], lines[4]["into_fingerprint"]):  # both alerts a merge names
        assert f"no alert {fingerprint!r} that started by {DAY}T02:14:00+00:00 is stored yet" in merge.error
    assert (
        sum("actions.jsonl:5 (merge at " in message and "expired" in message for message in caplog.messages)
        == 1
    )

    assert apply_pending_actions() == {
        "applied": 0,
        "already": 0,
        "pending": 0,
        "failed": 0,
        "expired": 0,
    }  # not tried again
    listed = listed_pending(tmp_path)
    assert [row["source"] for row in listed] == [f"actions.jsonl:{n}" for n in range(1, 6)]
    assert {row["state"] for row in listed} == {"expired"} and all(
        row["expires_at"] is None for row in listed
    )
    assert "no alert" in listed[0]["waiting_for"] and listed[0]["error"].startswith("expired: ")

    totals, err = run(
        "import_actions", str(actions), folder=tmp_path
    )  # a re-import tries them again, with a new limit
    assert totals["pending"] == 5 and "5 kept line(s) expired" not in err
    assert not PendingAction.objects.exclude(expired_at=None).exists()
    assert {row["state"] for row in listed_pending(tmp_path)} == {"waiting"}


def test_the_limit_is_the_setting_and_a_line_whose_alerts_came_late_is_still_applied_not_expired(
    files, tmp_path, settings, django_capture_on_commit_callbacks
):
    integration, alerts, actions, in_order, _ = files
    settings.PENDING_ACTION_TTL_HOURS = 2
    run("import_actions", str(actions), folder=tmp_path)
    kept_at = PendingAction.objects.earliest("kept_at").kept_at
    assert pending_actions_apply(now=kept_at + timedelta(hours=1))["pending"] == 5
    with django_capture_on_commit_callbacks(execute=False):
        run("import_alerts", str(alerts), "--integration", str(integration), folder=tmp_path)
    deliveries_processed(django_capture_on_commit_callbacks, correlated=True)
    assert pending_actions_apply(now=kept_at + timedelta(hours=3)) == {
        "applied": 5,
        "already": 0,
        "pending": 0,
        "failed": 0,
        "expired": 0,
    }
    assert snapshot() == in_order and not PendingAction.objects.exists()


def test_expired_lines_are_told_by_import_alerts_and_import_actions_and_filtered_in_the_admin(
    files, tmp_path, settings, admin_client
):
    integration, _, actions, _, _ = files
    run("import_actions", str(actions), folder=tmp_path)
    PendingAction.objects.filter(source="actions.jsonl:1").update(
        kept_at=timezone.now() - timedelta(hours=25)
    )
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    _, err = run("import_alerts", str(empty), "--integration", str(integration), folder=tmp_path)
    assert "pending actions: 0 applied, 0 failed, 4 still wait for their alerts, 1 expired" in err
    assert "actions.jsonl:1: expired: its alerts did not arrive within 24 h of its import: no alert " in err
    _, err = run("import_actions", str(empty), folder=tmp_path)
    assert "1 kept line(s) expired, their alerts never came: see import_actions --pending" in err

    expired = admin_client.get("/admin/incidents/pendingaction/?state=expired")
    assert expired.status_code == 200 and expired.context["cl"].result_count == 1
    assert admin_client.get("/admin/incidents/pendingaction/?state=waiting").context["cl"].result_count == 4
    assert admin_client.get("/admin/incidents/pendingaction/?state=failed").context["cl"].result_count == 0
