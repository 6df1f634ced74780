"""The actions endpoint, the incident page's forms and `import_actions` are one service: every
action kind by every role, the same result through the endpoint and through a file (twice), clear
4xx answers for bodies a client gets wrong, and no deadlock with a correlation worker."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from incidents import services
from incidents.action_bodies import incident_act_on_body
from incidents.models import Alert, Decision, Delivery, Incident, IncidentAction, IncidentEdge, RootCandidate
from incidents.services.correlation import correlation_run
from incidents.services.correlation.run import lock_key
from incidents.services.incidents import incident_exclude_alert
from tests.conftest import require_postgres
from tests.incidents.conftest import DAY, SIBLINGS, am_body, cascade

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(make_integration, deliver):
    integration = make_integration()
    for alert in cascade():
        assert deliver(integration, am_body(alert)).status_code == 202
    return integration


def alert(name: str, pod: str | None = None) -> Alert:
    rows = Alert.objects.filter(alertname=name)
    return rows.get(labels__pod=pod) if pod else rows.get()


def main_incident() -> Incident:
    return alert("LLMContainerOOMKilled").incident


def steps() -> list[tuple[str, dict, dict]]:
    """Every action kind, in an order each state allows: (at, API body without `at`, the same
    line's naming for an actions file)."""
    oom, queue, ttft, crash, disk = (
        alert("LLMContainerOOMKilled"),
        alert("VLLMRequestQueueHigh", SIBLINGS[0]),
        alert("LLMTTFTP99High"),
        alert("KubePodCrashLooping"),
        alert("NodeDiskFilling"),
    )
    main = oom.incident
    return [
        (f"{DAY}T02:06:00Z", {"action": "acknowledge"}, {"fingerprint": oom.fingerprint}),
        (f"{DAY}T02:07:00Z", {"action": "assign", "username": "lead"}, {"fingerprint": oom.fingerprint}),
        (
            f"{DAY}T02:08:00Z",
            {"action": "note", "text": "frag again <b>pod-2</b>"},
            {"fingerprint": oom.fingerprint},
        ),
        (f"{DAY}T02:09:00Z", {"action": "severity", "level": "critical"}, {"fingerprint": oom.fingerprint}),
        (f"{DAY}T02:10:00Z", {"action": "degrade", "level": "L2"}, {"fingerprint": oom.fingerprint}),
        (
            f"{DAY}T02:11:00Z",
            {"action": "false_positive", "alert_id": queue.pk},
            {"fingerprint": queue.fingerprint},
        ),
        (
            f"{DAY}T02:12:00Z",
            {"action": "exclude_alert", "alert_id": ttft.pk},
            {"fingerprint": ttft.fingerprint},
        ),
        (
            f"{DAY}T02:13:00Z",
            {"action": "split", "alert_ids": [crash.pk]},
            {"fingerprint": crash.fingerprint, "fingerprints": [crash.fingerprint]},
        ),
        (
            f"{DAY}T02:14:00Z",
            {"action": "merge", "into": main.pk, "_on": disk.incident_id},
            {"fingerprint": disk.fingerprint, "into_fingerprint": oom.fingerprint},
        ),
        (f"{DAY}T02:15:00Z", {"action": "mitigate"}, {"fingerprint": oom.fingerprint}),
        (f"{DAY}T02:16:00Z", {"action": "refresh_evidence"}, {"fingerprint": oom.fingerprint}),
        (f"{DAY}T02:20:00Z", {"action": "resolve"}, {"fingerprint": oom.fingerprint}),
        (f"{DAY}T02:21:00Z", {"action": "reopen"}, {"fingerprint": oom.fingerprint}),
    ]


def post(api, user, body: dict, at: str | None = None):
    body = dict(body)
    target = body.pop("_on", None) or main_incident().pk
    if at:
        body["at"] = at
    return api(user, "post", f"/api/v1/incidents/{target}/actions/", body)


def snapshot() -> dict:
    """What the actions left, named by alerts rather than ids (two runs make different ids)."""

    def name(row: Alert) -> str:
        return row.alertname + "/" + row.labels.get("pod", "")

    groups = {}
    for row in Alert.objects.order_by("id"):
        groups.setdefault(row.incident_id, []).append(name(row))
    incidents = []
    for incident in Incident.objects.order_by("id"):
        members = tuple(sorted(groups.get(incident.pk, [])))
        merged_into = (
            tuple(sorted(groups.get(incident.merged_into_id, []))) if incident.merged_into_id else None
        )
        incidents.append(
            (
                members,
                merged_into,
                incident.status,
                incident.severity,
                incident.degradation,
                incident.assignee.username if incident.assignee else None,
                incident.acknowledged_at,
                incident.mitigated_at,
                incident.resolved_at,
                tuple(
                    sorted(
                        (
                            a.action,
                            a.by.username if a.by else None,
                            a.at.isoformat(),
                            json.dumps(
                                {
                                    k: v
                                    for k, v in a.body.items()
                                    if k not in ("alert_id", "alert_ids", "into", "from")
                                },
                                sort_keys=True,
                            ),
                        )
                        for a in incident.actions.all()
                    )
                ),
            )
        )
    return {
        "incidents": sorted(incidents, key=repr),
        "unattached": sorted(groups.get(None, [])),
        "false_positive": sorted(name(row) for row in Alert.objects.filter(false_positive=True)),
        "decisions": sorted(
            (d.kind, tuple(sorted(d.alert_keys)), d.by.username, d.at.isoformat())
            for d in Decision.objects.all()
        ),
    }


@pytest.mark.parametrize("role", ["responder", "author", "admin", "superuser"])
def test_every_action_kind_is_allowed_from_responder_up_and_recorded_with_who_and_when(
    fleet, users, api, role
):
    if role == "superuser":
        actor = User.objects.create_superuser("root", "root@localhost", "x")
    else:
        actor = users(f"u-{role}", role)
    users("lead", "responder")
    plan = steps()
    for at, body, _ in plan:
        response = post(api, actor, body, at)
        assert response.status_code in (200, 202), (body, response.json())
    recorded = list(
        IncidentAction.objects.filter(by=actor)
        .exclude(body__has_key="from")
        .order_by("at", "id")
        .values_list("action", "at")
    )
    assert [action for action, _ in recorded] == [body["action"] for _, body, _ in plan]
    assert [at.isoformat().replace("+00:00", "Z") for _, at in recorded] == [at for at, _, _ in plan]


@pytest.mark.parametrize("role", [None, "viewer"])
def test_viewers_and_users_in_no_group_may_not_take_any_action_anywhere(
    fleet, users, api, client, tmp_path, role
):
    viewer = users(f"u-{role}", role)
    users("lead", "responder")
    before = snapshot()
    for at, body, _ in steps():
        response = post(api, viewer, body, at)
        assert response.status_code == 403, (body, response.json())
        assert "responder" in response.json()["error"]
        page = dict(body, at=at)
        page.pop("_on", None)
        client.force_login(viewer)
        assert (
            client.post(
                f"/incidents/{main_incident().pk}/act/",
                {k: v for k, v in page.items() if not isinstance(v, list)},
            ).status_code
            == 302
        )
    lines = [
        {
            "at": at,
            "by": viewer.username,
            **{k: v for k, v in body.items() if k not in ("_on", "alert_id", "alert_ids", "into")},
            **naming,
        }
        for at, body, naming in steps()
    ]
    path = tmp_path / "actions.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    call_command(
        "import_actions", str(path), stdout=open(tmp_path / "out", "w"), stderr=open(tmp_path / "err", "w")
    )
    assert json.loads((tmp_path / "out").read_text()) == {
        "applied": 0,
        "already": 0,
        "pending": 0,
        "failed": len(lines),
    }
    assert snapshot() == before and not IncidentAction.objects.exists() and not Decision.objects.exists()


def test_import_actions_gives_what_the_endpoint_gives_and_a_second_run_changes_nothing(
    make_integration, deliver, users, api, tmp_path
):
    integration = make_integration()

    def load():
        Incident.objects.all().delete()
        Alert.objects.all().delete()
        Delivery.objects.all().delete()  # else the same bodies answer as delivered already
        for row in cascade():
            deliver(integration, am_body(row))

    ana = users("ana", "responder")
    users("lead", "responder")
    load()
    lines = []
    for at, body, naming in steps():
        lines.append(
            {
                "at": at,
                "by": "ana",
                **{k: v for k, v in body.items() if k not in ("_on", "alert_id", "alert_ids", "into")},
                **naming,
            }
        )
        assert post(api, ana, body, at).status_code in (200, 202)
    through_endpoint = snapshot()
    assert through_endpoint["unattached"] == ["LLMTTFTP99High/"] and through_endpoint["false_positive"] == [
        f"VLLMRequestQueueHigh/{SIBLINGS[0]}"
    ]

    Decision.objects.all().delete()
    load()
    assert not IncidentAction.objects.exists()
    path = tmp_path / "actions.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    totals = []
    for _ in range(2):
        out = tmp_path / "out"
        call_command("import_actions", str(path), stdout=open(out, "w"), stderr=open(tmp_path / "err", "w"))
        totals.append(json.loads(out.read_text()))
        assert snapshot() == through_endpoint, (tmp_path / "err").read_text()
    assert totals == [
        {"applied": len(lines), "already": 0, "pending": 0, "failed": 0},
        {"applied": 0, "already": len(lines), "pending": 0, "failed": 0},
    ]


def test_import_actions_reports_bad_lines_and_files_without_crashing(fleet, tmp_path):
    oom = alert("LLMContainerOOMKilled")
    lines = [
        json.dumps(
            {
                "at": f"{DAY}T02:06:00Z",
                "by": "a\x00b",
                "action": "acknowledge",
                "fingerprint": oom.fingerprint,
            }
        ),
        json.dumps(
            {
                "at": f"{DAY}T02:06:00Z",
                "by": "ana",
                "action": "assign",
                "username": "x\x00",
                "fingerprint": oom.fingerprint,
            }
        ),
        json.dumps(
            {
                "at": f"{DAY}T02:06:00Z",
                "by": "ana",
                "action": "acknowledge",
                "when": "now",
                "fingerprint": oom.fingerprint,
            }
        ),
        json.dumps(["not", "an", "object"]),
        json.dumps(
            {
                "at": f"{DAY}T02:06:00Z",
                "by": "ana",
                "action": "acknowledge",
                "fingerprint": oom.fingerprint + "\x00",
            }
        ),
        json.dumps(
            {
                "at": f"{DAY}T02:06:00Z",
                "by": "\ud800",
                "action": "acknowledge",
                "fingerprint": oom.fingerprint,
            }
        ),
        json.dumps(
            {
                "at": f"{DAY}T02:06:00Z",
                "by": "ana",
                "action": "split",
                "fingerprints": ["\ud800"],
                "fingerprint": oom.fingerprint,
            }
        ),
        "{broken",
        json.dumps(
            {"at": f"{DAY}T02:07:00Z", "by": "ana", "action": "acknowledge", "fingerprint": oom.fingerprint}
        ),
    ]
    path = tmp_path / "actions.jsonl"
    path.write_text("\n".join(lines))
    err = tmp_path / "err"
    call_command("import_actions", str(path), stdout=open(tmp_path / "out", "w"), stderr=open(err, "w"))
    assert json.loads((tmp_path / "out").read_text()) == {
        "applied": 1,
        "already": 0,
        "pending": 0,
        "failed": 8,
    }
    assert "actions.jsonl:3: when: not a field of acknowledge" in err.read_text()
    (tmp_path / "latin1.jsonl").write_bytes(b"\xff\xfe{}")
    from django.core.management.base import CommandError

    for bad in (tmp_path / "latin1.jsonl", tmp_path, tmp_path / "missing.jsonl"):
        with pytest.raises(CommandError, match="cannot read"):
            call_command("import_actions", str(bad), stdout=open("/dev/null", "w"))


@pytest.mark.parametrize(
    "body,status,fragment",
    [
        ({"action": "assign", "username": "lead\x00"}, 400, "username"),
        ({"action": "assign", "username": "\ud800"}, 400, "username: contains an unpaired surrogate"),
        ({"action": "note", "text": "a\ud800b"}, 400, "text: contains an unpaired surrogate"),
        ({"action": "note", "text": "a\x00b"}, 400, "text"),
        ({"action": "assign", "username": "x" * 100_000}, 400, "username"),
        ({"action": "note", "text": "x" * 20_001}, 400, "text"),
        ({"action": "acknowledge", "time": "2026-11-29T02:06:00Z"}, 400, "time: not a field of acknowledge"),
        ({"action": "note", "text": "hi", "by": "someone-else"}, 400, "by: not a field of note"),
        ({"action": "merge", "into_id": 1}, 400, "into_id"),
        ({"action": "severity", "level": "critical", "\x00": 1}, 400, "not a field"),
        ({"action": "merge", "into": True}, 400, "into"),
        ({"action": "split", "alert_ids": ["1"]}, 400, "alert_ids[0]"),
        ({"action": "exclude_alert", "alert_id": 1.0}, 400, "alert_id"),
        ({"action": "acknowledge", "at": "2026-11-29T02:06:00"}, 400, "at"),
        ({"action": "acknowledge", "at": "0001-01-01T00:00:00Z"}, 400, "at"),
    ],
)
def test_action_bodies_a_client_gets_wrong_are_400s_naming_the_field(
    fleet, users, api, body, status, fragment
):
    users("lead", "responder")
    response = post(api, users("r", "responder"), body)
    assert response.status_code == status and fragment in response.json()["error"], response.json()
    assert not IncidentAction.objects.exists()


def test_a_merged_incident_says_where_it_went_and_acts_only_there(fleet, users, api):
    responder = users("r", "responder")
    main, disk = main_incident(), alert("NodeDiskFilling").incident
    assert post(api, responder, {"action": "merge", "into": main.pk, "_on": disk.pk}).json()["id"] == main.pk
    detail = api(responder, "get", f"/api/v1/incidents/{disk.pk}/").json()
    assert detail["merged_into"] == main.pk and detail["alerts"] == [] and detail["alert_count"] == 0
    assert (
        detail["root_cause"] is None
        and detail["root_candidates"] == []
        and detail["edges"] == []
        and detail["chain"] == []
    )
    assert api(responder, "get", f"/api/v1/incidents/{main.pk}/").json()["merged_into"] is None
    listed = api(responder, "get", "/api/v1/incidents/?status=all").json()["results"]
    assert disk.pk not in [item["id"] for item in listed] and all(
        item["merged_into"] is None for item in listed
    )
    refused = post(api, responder, {"action": "acknowledge", "_on": disk.pk})
    assert refused.status_code == 409 and f"merged into {main.pk}" in refused.json()["error"]
    again = post(
        api, responder, {"action": "merge", "into": disk.pk, "_on": alert("LLMTTFTP99High").incident_id}
    )
    assert again.status_code == 409 and f"merged into {main.pk}" in again.json()["error"]


def test_excluding_the_last_alert_leaves_no_root_chain_or_candidates_naming_it(fleet, users, api):
    responder = users("r", "responder")
    disk = alert("NodeDiskFilling")
    incident = disk.incident
    assert incident.alerts.count() == 1 and incident.status == "open"
    response = post(
        api,
        responder,
        {"action": "exclude_alert", "alert_id": disk.pk, "_on": incident.pk},
        f"{DAY}T01:50:00Z",
    )
    assert response.status_code == 200
    body = response.json()
    assert body["alerts"] == [] and body["alert_count"] == 0
    assert (
        body["root_cause"] is None
        and body["chain"] == []
        and body["root_candidates"] == []
        and body["edges"] == []
    )
    assert body["status"] == "resolved" and body["resolved_at"] == f"{DAY}T01:50:00Z"
    assert (
        not RootCandidate.objects.filter(alert=disk).exists()
        and not IncidentEdge.objects.filter(cause=disk).exists()
    )
    assert Alert.objects.get(pk=disk.pk).incident_id is None
    assert incident.pk not in [
        item["id"] for item in api(responder, "get", "/api/v1/incidents/").json()["results"]
    ]
    call_command("recorrelate", "--since", f"{DAY}T00:00:00Z", stdout=open("/dev/null", "w"))
    assert (
        Alert.objects.get(pk=disk.pk).incident_id is None
        and Incident.objects.get(pk=incident.pk).root_alert_id is None
    )


@pytest.mark.django_db(transaction=True)
def test_a_grouping_action_while_a_worker_holds_the_key_waits_instead_of_deadlocking(make_integration, users):
    """A correlation run holds its key's lock while it writes incidents; an action that locked the
    incident's row first and then asked for the key (to re-run correlation) deadlocked with it."""
    require_postgres()
    integration = make_integration()
    for row in cascade():
        receipt = services.delivery_receive(integration=integration, body=am_body(row), headers={})
        services.delivery_process(delivery_id=receipt.body["delivery"])
    correlation_run(key="prod-eu")
    incident = main_incident()
    ttft = alert("LLMTTFTP99High")
    responder = users("r", "responder")
    holding, acting = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with transaction.atomic():
                lock_key("prod-eu")
                holding.set()
                acting.wait(5)
                time.sleep(0.6)  # the action has had time to lock what it locks before the key
                Incident.objects.filter(pk=incident.pk).update(title="written by a correlation run")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    def person() -> None:
        try:
            holding.wait(5)
            acting.set()
            incident_exclude_alert(
                incident=Incident.objects.get(pk=incident.pk), user=responder, via="api", alert_id=ttft.pk
            )
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker), threading.Thread(target=person)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert Alert.objects.get(pk=ttft.pk).incident_id is None
    assert IncidentAction.objects.filter(action="exclude_alert", incident=incident).count() == 1


def test_split_looks_its_alerts_up_at_once_and_names_the_first_wrong_id(
    fleet, users, api, django_assert_max_num_queries
):
    responder = users("r", "responder")
    main = main_incident()
    members = list(main.alerts.order_by("id").values_list("pk", flat=True))
    other = alert("NodeDiskFilling").pk
    url = f"/api/v1/incidents/{main.pk}/actions/"
    response = api(responder, "post", url, {"action": "split", "alert_ids": members[:1] + [10**12]})
    assert response.status_code == 400 and response.json()["error"] == f"alert_ids[1]: no alert {10**12}"
    response = api(responder, "post", url, {"action": "split", "alert_ids": members[:1] + [other]})
    assert (
        response.status_code == 409
        and response.json()["error"] == f"alert_ids[1]: alert {other} is not in incident {main.pk}"
    )
    response = api(responder, "post", url, {"action": "split", "alert_ids": members + members})
    assert response.status_code == 409 and "every alert" in response.json()["error"]
    with django_assert_max_num_queries(20):  # not one query per id
        response = api(responder, "post", url, {"action": "split", "alert_ids": members * 1000})
    assert response.status_code == 409 and "every alert" in response.json()["error"]
    assert not IncidentAction.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "body,field,kept",
    [
        ({"action": "severity", "level": "critical"}, "severity", "critical"),
        ({"action": "acknowledge"}, "status", "acknowledged"),
    ],
)
def test_an_action_during_a_correlation_run_of_its_key_is_not_overwritten_by_the_run(
    make_integration, users, body, field, kept
):
    """A run loads the key's incidents, then writes the fields it recomputed (severity, status)
    from what it loaded; an action committed in between was overwritten. Actions wait for the
    key's run instead, as runs of one key wait for each other."""
    require_postgres()
    integration = make_integration()
    for row in cascade():
        receipt = services.delivery_receive(integration=integration, body=am_body(row), headers={})
        services.delivery_process(delivery_id=receipt.body["delivery"])
    correlation_run(key="prod-eu")
    incident = main_incident()
    responder = users("r", "responder")
    loaded, acting = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with transaction.atomic():
                lock_key("prod-eu")
                stale = Incident.objects.in_bulk([incident.pk])[
                    incident.pk
                ]  # as sync.assign_identities loads it
                loaded.set()
                acting.wait(5)
                time.sleep(0.6)
                stale.severity, stale.status = "info", "open"  # what the run recomputed from its alerts
                stale.save(update_fields=["severity", "status", "updated_at"])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    def person() -> None:
        try:
            loaded.wait(5)
            acting.set()
            incident_act_on_body(
                incident=Incident.objects.get(pk=incident.pk), user=responder, via="api", body=body
            )
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run), threading.Thread(target=person)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert getattr(Incident.objects.get(pk=incident.pk), field) == kept


def test_splitting_off_most_alerts_answers_both_incidents(fleet, users, api):
    responder = users("r", "responder")
    main = main_incident()
    members = list(main.alerts.order_by("starts_at", "id"))
    keep, off = members[:2], members[2:]
    response = api(
        responder,
        "post",
        f"/api/v1/incidents/{main.pk}/actions/",
        {"action": "split", "alert_ids": [row.pk for row in off]},
    )
    assert response.status_code == 200
    answered = response.json()["incidents"]
    assert len(answered) == 2 and answered[0]["id"] == main.pk
    groups = [{item["id"] for item in incident["alerts"]} for incident in answered]
    assert {row.pk for row in keep} in groups and {row.pk for row in off} in groups
    assert {
        alert_row.incident_id for alert_row in Alert.objects.filter(pk__in=[row.pk for row in members])
    } == {item["id"] for item in answered}


def test_decisions_hold_when_the_same_alerts_arrive_again_in_another_order_and_by_recorrelate(
    make_integration, deliver, users, api
):
    """Decisions name occurrences, not rows: alerts stored again, in a shuffled order, fold into
    the incidents the people decided, incrementally and in batch."""
    import random

    integration = make_integration()
    responder = users("r", "responder")
    for row in cascade():
        deliver(integration, am_body(row))
    main, disk = main_incident(), alert("NodeDiskFilling").incident
    ttft, crash, queue = (
        alert("LLMTTFTP99High"),
        alert("KubePodCrashLooping"),
        alert("VLLMRequestQueueHigh", SIBLINGS[1]),
    )
    for body in (
        {"action": "exclude_alert", "alert_id": ttft.pk},
        {"action": "false_positive", "alert_id": queue.pk},
        {"action": "split", "alert_ids": [crash.pk]},
        {"action": "merge", "into": main.pk, "_on": disk.pk},
    ):
        assert post(api, responder, body).status_code == 200

    def grouping():
        groups = {}
        for row in Alert.objects.all():
            groups.setdefault(row.incident_id, set()).add(row.alertname + "/" + row.labels.get("pod", ""))
        return (
            sorted(sorted(group) for key, group in groups.items() if key),
            sorted(groups.get(None, set())),
            sorted(Alert.objects.filter(false_positive=True).values_list("alertname", flat=True)),
        )

    decided = grouping()
    assert decided[1] == ["LLMTTFTP99High/"] and decided[2] == ["VLLMRequestQueueHigh"]
    for seed in (1, 2):
        Incident.objects.all().delete()
        Alert.objects.all().delete()
        Delivery.objects.all().delete()
        rows = cascade()
        random.Random(seed).shuffle(rows)
        for row in rows:
            deliver(integration, am_body(row))
        assert grouping() == decided, seed
        call_command("recorrelate", "--since", f"{DAY}T00:00:00Z", stdout=open("/dev/null", "w"))
        assert grouping() == decided, seed


@pytest.mark.parametrize(
    "body",
    [
        {"action": "acknowledge", "at": "1970-01-01T00:00:00Z"},
        {"action": "resolve", "at": f"{DAY}T01:44:59Z"},
        {"action": "note", "text": "before it began", "at": f"{DAY}T01:00:00Z"},
    ],
)
def test_an_action_dated_before_its_incident_began_is_a_conflict_naming_both_moments(fleet, users, api, body):
    main = main_incident()
    assert main.started_at.isoformat() == f"{DAY}T01:45:00+00:00"
    response = post(api, users("r", "responder"), body)
    assert response.status_code == 409, response.json()
    assert f"{DAY}T01:45:00Z" in response.json()["error"] and body["at"] in response.json()["error"]
    assert not main.actions.exists()
    detail = api(users("v", "viewer"), "get", f"/api/v1/incidents/{main.pk}/").json()
    assert all(value is None or value >= 0 for value in detail["durations"].values())


def test_judging_an_alert_false_positive_twice_is_a_conflict(fleet, users, api):
    responder = users("r", "responder")
    oom = alert("LLMContainerOOMKilled")
    assert (
        post(api, responder, {"action": "false_positive", "alert_id": oom.pk}, f"{DAY}T02:10:00Z").status_code
        == 200
    )
    again = post(api, responder, {"action": "false_positive", "alert_id": oom.pk})
    assert (
        again.status_code == 409
        and "already" in again.json()["error"]
        and f"{DAY}T02:10:00Z" in again.json()["error"]
    )
    assert (
        Decision.objects.count() == 1 and IncidentAction.objects.filter(action="false_positive").count() == 1
    )


def test_the_incident_people_acted_on_stays_with_the_alerts_they_kept_when_most_are_split_off(
    fleet, users, api
):
    """A split names the alerts that go: the incident (its acknowledgement, its notes) stays with
    the rest, even when the part split off is the bigger one."""
    responder = users("r", "responder")
    main = main_incident()
    url = f"/api/v1/incidents/{main.pk}/actions/"
    assert api(responder, "post", url, {"action": "acknowledge"}).status_code == 200
    members = list(main.alerts.order_by("starts_at", "id"))
    keep, off = members[:2], members[2:]
    assert len(off) > len(keep)
    assert (
        api(responder, "post", url, {"action": "split", "alert_ids": [row.pk for row in off]}).status_code
        == 200
    )
    assert {row.pk for row in Incident.objects.get(pk=main.pk).alerts.all()} == {row.pk for row in keep}
    assert Incident.objects.get(pk=main.pk).acknowledged_at is not None
    new_ids = set(Alert.objects.filter(pk__in=[row.pk for row in off]).values_list("incident_id", flat=True))
    assert len(new_ids) == 1 and main.pk not in new_ids
    call_command("recorrelate", "--since", "2000-01-01T00:00:00Z", stdout=open("/dev/null", "w"))
    assert {row.pk for row in Incident.objects.get(pk=main.pk).alerts.all()} == {row.pk for row in keep}


def in_minutes(minutes: int) -> str:
    return (timezone.now() + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(
    "body", [{"action": "acknowledge"}, {"action": "note", "text": "written tomorrow"}, {"action": "resolve"}]
)
def test_an_action_dated_in_the_future_is_a_400_naming_at(fleet, users, api, body):
    response = post(api, users("r", "responder"), body, in_minutes(10))
    assert response.status_code == 400, response.json()
    assert response.json()["error"].startswith("at: ") and "in the future" in response.json()["error"]
    assert not IncidentAction.objects.exists() and main_incident().acknowledged_at is None


def test_an_action_a_few_minutes_ahead_is_taken_as_clock_skew(fleet, users, api):
    assert post(api, users("r", "responder"), {"action": "acknowledge"}, in_minutes(4)).status_code == 200


def test_import_actions_reports_a_line_dated_in_the_future_and_applies_the_rest(fleet, tmp_path):
    oom = alert("LLMContainerOOMKilled")
    lines = [
        {"at": in_minutes(60), "by": "ana", "action": "acknowledge", "fingerprint": oom.fingerprint},
        {
            "at": f"{DAY}T02:07:00Z",
            "by": "ana",
            "action": "note",
            "text": "looking",
            "fingerprint": oom.fingerprint,
        },
    ]
    path = tmp_path / "actions.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    err = tmp_path / "err"
    call_command("import_actions", str(path), stdout=open(tmp_path / "out", "w"), stderr=open(err, "w"))
    assert json.loads((tmp_path / "out").read_text()) == {
        "applied": 1,
        "already": 0,
        "pending": 0,
        "failed": 1,
    }
    assert err.read_text().startswith(f"actions.jsonl:1: at: {lines[0]['at']} is in the future")
    assert list(IncidentAction.objects.values_list("action", flat=True)) == ["note"]
