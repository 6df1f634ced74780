"""Incidents in the app: correlation on delivery, the incidents API, and the actions people take."""

from __future__ import annotations

import json
import random

import pytest
from django.core.management import call_command

from incidents.models import Alert, Decision, Incident, IncidentAction
from tests.incidents.conftest import BAD_POD, DAY, FLEET, am_alert, am_body, cascade

pytestmark = pytest.mark.django_db


def deliver_all(deliver, integration, alerts: list[dict], *, one_per_body: bool = True) -> None:
    bodies = [[alert] for alert in alerts] if one_per_body else [alerts]
    for body in bodies:
        assert deliver(integration, am_body(*body)).status_code == 202


def the_incident_of(alertname: str) -> Incident:
    return Alert.objects.get(alertname=alertname).incident


def test_cascade_lands_in_one_incident_rooted_at_fragmentation(make_integration, deliver, users, api):
    deliver_all(deliver, make_integration(), cascade())
    incident = the_incident_of("LLMContainerOOMKilled")
    members = set(incident.alerts.values_list("alertname", flat=True))
    assert {
        "KVCacheFragmentationHigh",
        "LLMContainerOOMKilled",
        "KubePodCrashLooping",
        "VLLMRequestQueueHigh",
    } <= members
    assert "NodeDiskFilling" not in members
    body = api(users("viewer1", "viewer"), "get", f"/api/v1/incidents/{incident.pk}/").json()
    assert body["root_cause"]["alertname"] == "KVCacheFragmentationHigh"
    assert 0 < body["root_cause"]["confidence"] <= 1 and body["root_cause"]["explanation"]
    assert body["root_candidates"][0]["alert_id"] == body["root_cause"]["alert_id"]
    chain = [link["alertname"] for link in body["chain"]]
    assert chain.index("KVCacheFragmentationHigh") < chain.index("LLMContainerOOMKilled")
    assert body["edges"] and {"cause_alert_id", "effect_alert_id", "rule", "lag_seconds"} <= set(
        body["edges"][0]
    )
    assert (
        body["scope"]["cluster"] == "prod-eu"
        and "engine" in body["layers"]
        and "oom" in body["failure_modes"]
    )
    assert body["alert_count"] == len(body["alerts"]) and set(body["durations"]) == {
        "detect_s",
        "acknowledge_s",
        "mitigate_s",
        "resolve_s",
    }
    listed = api(users("viewer2", "viewer"), "get", "/api/v1/incidents/").json()
    assert incident.pk in [item["id"] for item in listed["results"]]
    alerts = api(users("viewer3", "viewer"), "get", "/api/v1/alerts/?label=pod:" + BAD_POD).json()["results"]
    assert {alert["incident"] for alert in alerts} == {incident.pk} and all(
        alert["layer"] for alert in alerts
    )


def test_same_alerts_in_shuffled_order_give_the_same_incidents(make_integration, deliver):
    def partition() -> set[frozenset[str]]:
        groups = {}
        for alert in Alert.objects.exclude(incident=None):
            groups.setdefault(alert.incident_id, set()).add(alert.alertname + alert.labels.get("pod", ""))
        return {frozenset(group) for group in groups.values()}

    alerts = cascade()
    deliver_all(deliver, make_integration(), alerts)
    first = partition()
    Alert.objects.all().delete()
    Incident.objects.all().delete()
    random.Random(7).shuffle(alerts)
    deliver_all(deliver, make_integration(), alerts)
    assert partition() == first
    call_command("recorrelate", "--since", f"{DAY}T00:00:00Z", stdout=open("/dev/null", "w"))
    assert partition() == first


def test_redelivering_and_recorrelating_creates_no_duplicate_incidents(make_integration, deliver):
    integration = make_integration()
    deliver_all(deliver, integration, cascade(), one_per_body=False)
    before = sorted(Incident.objects.values_list("pk", flat=True))
    deliver_all(deliver, integration, cascade(), one_per_body=True)
    call_command("recorrelate", "--since", f"{DAY}T00:00:00Z", stdout=open("/dev/null", "w"))
    assert sorted(Incident.objects.values_list("pk", flat=True)) == before


def test_resolved_notifications_resolve_the_incident(make_integration, deliver):
    integration = make_integration()
    alert = am_alert("LLMContainerOOMKilled", "2026-11-29T02:00:00Z", pod=BAD_POD, **FLEET)
    deliver(integration, am_body(alert))
    incident = the_incident_of("LLMContainerOOMKilled")
    assert incident.status == "open"
    deliver(integration, am_body(dict(alert, status="resolved", endsAt="2026-11-29T02:20:00Z")))
    incident.refresh_from_db()
    assert incident.status == "resolved" and incident.resolved_at.isoformat() == "2026-11-29T02:20:00+00:00"


def test_a_growing_incident_is_written_with_its_new_fields_and_time(make_integration, deliver):
    """Every changed field of a growing incident reaches the database, `updated_at` moves with
    them, and a run that changes nothing writes nothing."""
    integration = make_integration()
    first, *rest = [alert for alert in cascade() if alert["labels"]["alertname"] != "NodeDiskFilling"]
    deliver(integration, am_body(first))
    incident = the_incident_of(first["labels"]["alertname"])
    created = incident.updated_at
    deliver_all(deliver, integration, rest, one_per_body=False)
    incident.refresh_from_db()
    assert incident.updated_at > created
    assert incident.last_alert_at.isoformat() == max(alert["startsAt"] for alert in rest).replace(
        "Z", "+00:00"
    )
    assert incident.status == "open" and incident.alerts.count() == len(rest) + 1
    assert (
        incident.root_alert.alertname == "KVCacheFragmentationHigh" and len(incident.chain) == len(rest) + 1
    )
    grown = incident.updated_at
    deliver_all(deliver, integration, rest, one_per_body=False)  # the same alerts again
    incident.refresh_from_db()
    assert incident.updated_at == grown


@pytest.mark.parametrize(
    "role,expected", [(None, 403), ("viewer", 403), ("responder", 200), ("author", 200), ("admin", 200)]
)
def test_roles_decide_who_may_act(make_integration, deliver, users, api, role, expected):
    deliver_all(deliver, make_integration(), cascade()[:2])
    incident = the_incident_of("KVCacheFragmentationHigh")
    response = api(
        users(f"u-{role}", role),
        "post",
        f"/api/v1/incidents/{incident.pk}/actions/",
        {"action": "acknowledge"},
    )
    assert response.status_code == expected, response.json()
    assert IncidentAction.objects.filter(incident=incident).exists() == (expected == 200)


def test_every_action_is_recorded_with_who_and_when(make_integration, deliver, users, api):
    deliver_all(deliver, make_integration(), cascade())
    incident = the_incident_of("LLMContainerOOMKilled")
    oncall = users("oncall", "responder")
    users("lead", "responder")
    url = f"/api/v1/incidents/{incident.pk}/actions/"
    steps = [
        ({"action": "acknowledge", "at": f"{DAY}T02:07:00Z"}, 200),
        ({"action": "assign", "username": "lead"}, 200),
        ({"action": "note", "text": "<b>frag</b> again on pod-2"}, 200),
        ({"action": "severity", "level": "critical"}, 200),
        ({"action": "degrade", "level": "L2", "at": f"{DAY}T02:15:00Z"}, 200),
        ({"action": "mitigate", "at": f"{DAY}T02:20:00Z"}, 200),
        ({"action": "refresh_evidence"}, 202),
        ({"action": "resolve", "at": f"{DAY}T02:40:00Z"}, 200),
        ({"action": "reopen"}, 200),
    ]
    for body, status in steps:
        response = api(oncall, "post", url, body)
        assert response.status_code == status, (body, response.json())
    detail = api(oncall, "get", f"/api/v1/incidents/{incident.pk}/").json()
    assert (
        detail["acknowledged_at"] == f"{DAY}T02:07:00Z" and detail["mitigated_at"] is None
    )  # reopened: no longer mitigated
    assert (
        detail["status"] == "acknowledged"
        and detail["severity"] == "critical"
        and detail["assignee"] == "lead"
    )
    assert detail["degradation"] == "L2"
    assert detail["started_at"] == f"{DAY}T01:45:00Z" and detail["durations"]["acknowledge_s"] == 22 * 60
    recorded = list(
        IncidentAction.objects.filter(incident=incident).order_by("id").values_list("action", "by__username")
    )
    assert [action for action, _ in recorded] == [step[0]["action"] for step in steps]
    assert {by for _, by in recorded} == {"oncall"}


@pytest.mark.parametrize(
    "body,status,fragment",
    [
        ({"action": "explode"}, 400, "action"),
        ([], 400, "body"),
        ({"action": "severity", "level": "sev0"}, 400, "level"),
        ({"action": "assign", "username": "ghost"}, 400, "ghost"),
        ({"action": "note", "text": ""}, 400, "text"),
        ({"action": "degrade", "level": "L9"}, 400, "level"),
        ({"action": "acknowledge", "at": "tomorrow"}, 400, "at"),
        ({"action": "merge", "into": "x"}, 400, "into"),
        ({"action": "split", "alert_ids": []}, 400, "alert_ids"),
        ({"action": "exclude_alert", "alert_id": 999999}, 400, "alert_id"),
        ({"action": "reopen"}, 409, "open"),
    ],
)
def test_bad_action_bodies_and_states_are_refused_clearly(
    make_integration, deliver, users, api, body, status, fragment
):
    deliver_all(deliver, make_integration(), cascade()[:3])
    incident = the_incident_of("LLMContainerOOMKilled")
    response = api(users("r", "responder"), "post", f"/api/v1/incidents/{incident.pk}/actions/", body)
    assert response.status_code == status and fragment in response.json()["error"]


def test_actions_replayed_late_are_judged_at_their_time(make_integration, deliver, users, api):
    integration = make_integration()
    alert = am_alert("LLMContainerOOMKilled", f"{DAY}T02:00:00Z", pod=BAD_POD, **FLEET)
    deliver(integration, am_body(alert))
    deliver(integration, am_body(dict(alert, status="resolved", endsAt=f"{DAY}T02:30:00Z")))
    incident = the_incident_of("LLMContainerOOMKilled")
    assert incident.status == "resolved"
    user = users("r", "responder")
    url = f"/api/v1/incidents/{incident.pk}/actions/"
    assert api(user, "post", url, {"action": "acknowledge", "at": f"{DAY}T02:05:00Z"}).status_code == 200
    assert api(user, "post", url, {"action": "mitigate", "at": f"{DAY}T02:45:00Z"}).status_code == 409
    resolved = api(user, "post", url, {"action": "resolve", "at": f"{DAY}T02:40:00Z"}).json()
    assert resolved["resolved_at"] == f"{DAY}T02:40:00Z" and resolved["durations"]["resolve_s"] == 40 * 60
    assert api(user, "post", url, {"action": "resolve"}).status_code == 409


def test_acknowledging_twice_is_a_conflict(make_integration, deliver, users, api):
    deliver_all(deliver, make_integration(), cascade()[:2])
    incident = the_incident_of("KVCacheFragmentationHigh")
    user = users("r", "responder")
    assert (
        api(user, "post", f"/api/v1/incidents/{incident.pk}/actions/", {"action": "acknowledge"}).status_code
        == 200
    )
    again = api(user, "post", f"/api/v1/incidents/{incident.pk}/actions/", {"action": "acknowledge"})
    assert again.status_code == 409 and again.json()["error"].endswith(
        "Z"
    )  # RFC 3339 in UTC, as the API writes times


def test_human_grouping_decisions_survive_recorrelation(make_integration, deliver, users, api):
    integration = make_integration()
    deliver_all(deliver, integration, cascade())
    user = users("r", "responder")
    incident = the_incident_of("LLMContainerOOMKilled")
    disk = the_incident_of("NodeDiskFilling")
    ttft = Alert.objects.get(alertname="LLMTTFTP99High")
    crash = Alert.objects.get(alertname="KubePodCrashLooping")
    oom = Alert.objects.get(alertname="LLMContainerOOMKilled")

    assert (
        api(
            user,
            "post",
            f"/api/v1/incidents/{incident.pk}/actions/",
            {"action": "exclude_alert", "alert_id": ttft.pk},
        ).status_code
        == 200
    )
    assert (
        api(
            user,
            "post",
            f"/api/v1/incidents/{incident.pk}/actions/",
            {"action": "false_positive", "alert_id": oom.pk},
        ).status_code
        == 200
    )
    split = api(
        user,
        "post",
        f"/api/v1/incidents/{incident.pk}/actions/",
        {"action": "split", "alert_ids": [crash.pk]},
    )
    assert split.status_code == 200 and len(split.json()["incidents"]) == 2
    merged = api(
        user, "post", f"/api/v1/incidents/{disk.pk}/actions/", {"action": "merge", "into": incident.pk}
    )
    assert merged.status_code == 200 and merged.json()["id"] == incident.pk

    def state():
        return (
            Alert.objects.get(pk=ttft.pk).incident_id,
            Alert.objects.get(pk=oom.pk).false_positive,
            Alert.objects.get(pk=crash.pk).incident_id != incident.pk,
            Alert.objects.get(alertname="NodeDiskFilling").incident_id,
        )

    before = state()
    assert before == (None, True, True, incident.pk)
    assert Decision.objects.count() == 4
    call_command("recorrelate", "--since", f"{DAY}T00:00:00Z", stdout=open("/dev/null", "w"))
    deliver_all(
        deliver,
        integration,
        [am_alert("VLLMRequestQueueHigh", f"{DAY}T02:06:00Z", pod="vllm-llama-7d9f8b6c4-zz9kk", **FLEET)],
    )
    assert state() == before
    assert Incident.objects.get(pk=disk.pk).merged_into_id == incident.pk
    assert (
        api(user, "get", "/api/v1/incidents/?status=all").json()["count"]
        == Incident.objects.visible().count()
    )


def test_import_actions_applies_each_as_its_user_at_its_time_and_twice_changes_nothing(
    make_integration, deliver, tmp_path
):
    deliver_all(deliver, make_integration(), cascade())
    oom = Alert.objects.get(alertname="LLMContainerOOMKilled")
    lines = [
        {"at": f"{DAY}T02:04:00Z", "by": "ana", "action": "acknowledge", "fingerprint": oom.fingerprint},
        {
            "at": f"{DAY}T02:05:00Z",
            "by": "ana",
            "action": "note",
            "text": "looking",
            "fingerprint": oom.fingerprint,
        },
        {"at": f"{DAY}T02:06:00Z", "by": "ben", "action": "false_positive", "fingerprint": oom.fingerprint},
        {
            "at": f"{DAY}T02:16:00Z",
            "by": "ben",
            "action": "degrade",
            "level": "L3",
            "fingerprint": oom.fingerprint,
        },
    ]
    path = tmp_path / "actions.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    call_command("import_actions", str(path), stdout=open("/dev/null", "w"))
    incident = Incident.objects.get(pk=oom.incident_id)
    recorded = list(incident.actions.values_list("action", "by__username", "at"))
    assert [(a, b) for a, b, _ in recorded] == [
        ("acknowledge", "ana"),
        ("note", "ana"),
        ("false_positive", "ben"),
        ("degrade", "ben"),
    ]
    assert incident.acknowledged_at.isoformat() == f"{DAY}T02:04:00+00:00" and incident.degradation == "L3"
    call_command("import_actions", str(path), stdout=open("/dev/null", "w"))
    assert incident.actions.count() == 4 and Decision.objects.count() == 1


@pytest.mark.parametrize("copies", [1, 4])
def test_incident_list_query_count_does_not_grow_with_incidents(
    make_integration, deliver, users, client, copies, django_assert_num_queries
):
    integration = make_integration()
    for copy in range(copies):
        alerts = [dict(alert, labels={**alert["labels"], "cluster": f"c{copy}"}) for alert in cascade()]
        deliver_all(deliver, integration, alerts, one_per_body=False)
    client.force_login(users("v", "viewer"))
    with django_assert_num_queries(5):  # session, user, count, the page, the chains' alerts
        response = client.get("/api/v1/incidents/?status=all")
    assert response.status_code == 200 and response.json()["count"] >= copies


def test_openapi_schema_documents_incidents_and_actions(users, api):
    schema = api(users("v", "viewer"), "get", "/api/v1/schema/?format=json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert {
        "/api/v1/incidents/",
        "/api/v1/incidents/{incident_id}/",
        "/api/v1/incidents/{incident_id}/actions/",
        "/api/v1/alerts/",
    } <= set(paths)


def test_openapi_schema_names_both_statuses_for_client_generators(capsys):
    """Alerts and incidents both have a `status`; each enum has a name a generated client can keep
    (not a hash suffix), and generating the schema warns of nothing."""
    from django.core.management import call_command

    call_command("spectacular", "--format", "openapi-json", "--fail-on-warn", "--validate")
    schema = json.loads(capsys.readouterr().out)
    enums = schema["components"]["schemas"]
    assert enums["IncidentStatusEnum"]["enum"] == ["open", "acknowledged", "mitigated", "resolved"]
    assert enums["AlertStatusEnum"]["enum"] == ["firing", "resolved"]
    assert not [name for name in enums if name.startswith("Status")]


def test_incident_page_links_runbooks_but_never_a_sender_script_url(make_integration, deliver, users, client):
    integration = make_integration()
    alerts = [
        am_alert("LLMVllmKVCacheUsageCritical", "2026-11-29T02:00:00Z", pod=BAD_POD, **FLEET),
        am_alert(
            "TeamOwnAlert",
            "2026-11-29T02:01:00Z",
            pod=BAD_POD,
            annotations={"runbook_url": "https://wiki.example/rb"},
            **FLEET,
        ),
        am_alert(
            "EvilAlert",
            "2026-11-29T02:02:00Z",
            pod=BAD_POD,
            annotations={"runbook_url": "javascript:alert(1)"},
            **FLEET,
        ),
    ]
    deliver_all(deliver, integration, alerts, one_per_body=False)
    client.force_login(users("v", "viewer"))
    for alert in Alert.objects.all():
        page = client.get(f"/incidents/{alert.incident_id}/").content.decode()
        assert "javascript:alert" not in page
    pages = "".join(
        client.get(f"/incidents/{pk}/").content.decode()
        for pk in set(Alert.objects.values_list("incident_id", flat=True))
    )
    assert 'href="/runbooks/LLMVllmKVCacheUsageCritical/"' in pages
    assert 'href="https://wiki.example/rb"' in pages


def test_alert_counts_are_counted_per_incident_listed_not_over_every_alert(
    make_integration, deliver, users, api
):
    """The list counts each listed incident's alerts (a subquery per row, `selectors.alert_count`):
    joined and grouped, PostgreSQL counted every stored alert before the page's LIMIT (1.0 s for
    the triage queue over a storm's 125,000 alerts)."""
    from incidents import selectors

    deliver_all(deliver, make_integration(), cascade())
    empty = Incident.objects.create(
        correlation_key="prod-eu", started_at=Incident.objects.first().started_at, title="emptied"
    )
    expected = {incident.pk: incident.alerts.count() for incident in Incident.objects.all()}
    assert expected[empty.pk] == 0 and max(expected.values()) > 1
    listed = api(users("viewer1", "viewer"), "get", "/api/v1/incidents/?status=all").json()["results"]
    assert {row["id"]: row["alert_count"] for row in listed} == expected
    assert api(users("viewer2", "viewer"), "get", f"/api/v1/incidents/{empty.pk}/").json()["alert_count"] == 0
    sql = str(selectors.incidents_list(status="all").query)
    assert (
        sql.count("GROUP BY") == 1 and 'GROUP BY U0."incident_id"' in sql
    )  # only inside the per-incident count


def test_chain_steps_carry_their_estimated_onset_beside_their_firing_time(
    make_integration, deliver, users, api
):
    """A fragmentation rule over a 15-minute average fires after the OOM it caused; the chain puts
    it first by its onset, and each step says both times."""
    integration = make_integration()
    slow = am_alert(
        "KVCacheFragmentationHigh",
        f"{DAY}T02:05:00Z",
        annotations={"summary": "fragmentation", "description": "over 25% for 15 minutes"},
        pod=BAD_POD,
        **FLEET,
    )
    oom = am_alert("LLMContainerOOMKilled", f"{DAY}T02:00:00Z", pod=BAD_POD, container="vllm", **FLEET)
    deliver(integration, am_body(oom))
    deliver(integration, am_body(slow))
    incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    body = api(users("v", "viewer"), "get", f"/api/v1/incidents/{incident.pk}/").json()
    steps = {link["alertname"]: link for link in body["chain"]}
    fragmentation = steps["KVCacheFragmentationHigh"]
    assert (
        fragmentation["started_at"] == f"{DAY}T02:05:00Z" and fragmentation["onset_at"] == f"{DAY}T01:50:00Z"
    )
    assert steps["LLMContainerOOMKilled"]["onset_at"] == steps["LLMContainerOOMKilled"]["started_at"]
    assert [link["alertname"] for link in body["chain"]][:2] == [
        "KVCacheFragmentationHigh",
        "LLMContainerOOMKilled",
    ]
    assert fragmentation["fired_before_cause"] is False
    assert steps["LLMContainerOOMKilled"]["fired_before_cause"] is True  # fired at 02:00, after 02:05's cause
    page = api(users("v2", "viewer"), "get", f"/incidents/{incident.pk}/").content.decode()
    assert page.count("fired before its cause") == 1
    assert (
        "LLMContainerOOMKilled fired first (at 02:00), but its condition began at 02:00"
        in body["root_cause"]["explanation"]
    )
