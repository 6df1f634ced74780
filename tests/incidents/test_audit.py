"""The audit record: one row per change a person makes, written by the services whatever the
interface (the incident page, the API, `import_actions`), readable by admins at /api/v1/audit/."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from incidents import services
from incidents.models import AuditRecord, Incident
from tests.incidents.conftest import DAY

pytestmark = pytest.mark.django_db


def records(incident: Incident) -> list[AuditRecord]:
    return list(AuditRecord.objects.for_object("incident", str(incident.pk)))


def test_an_acknowledge_through_the_page_leaves_one_record_naming_the_page(incident, users, client):
    ana = users("ana", "responder")
    client.force_login(ana)
    answer = client.post(f"/incidents/{incident.pk}/act/", {"action": "acknowledge"})
    assert answer.status_code == 302
    [record] = records(incident)
    assert (record.via, record.by_name, record.action, record.field) == (
        "page",
        "ana",
        "acknowledge",
        "acknowledged_at",
    )
    assert record.old is None and record.new == Incident.objects.get(
        pk=incident.pk
    ).acknowledged_at.isoformat().replace("+00:00", "Z")


def test_a_severity_through_the_api_records_old_and_new(incident, users, api):
    ana = users("ana", "responder")
    before = incident.severity
    answer = api(
        ana, "post", f"/api/v1/incidents/{incident.pk}/actions/", {"action": "severity", "level": "info"}
    )
    assert answer.status_code == 200, answer.content
    [record] = records(incident)
    assert (record.via, record.field, record.old, record.new) == ("api", "severity", before, "info")
    assert record.detail["body"] == {"level": "info"}


def test_an_imported_line_records_once_and_its_second_import_adds_nothing(incident, users, tmp_path):
    users("ana", "responder")
    oom = incident.alerts.get(alertname="LLMContainerOOMKilled")
    line = {"at": f"{DAY}T02:06:00Z", "by": "ana", "action": "acknowledge", "fingerprint": oom.fingerprint}
    path = tmp_path / "actions.jsonl"
    path.write_text(json.dumps(line) + "\n")
    for _ in range(2):
        call_command(
            "import_actions",
            str(path),
            stdout=open(tmp_path / "out", "w"),
            stderr=open(tmp_path / "err", "w"),
        )
    [record] = records(incident)
    assert (record.via, record.by_name, record.new) == ("import", "ana", f"{DAY}T02:06:00Z")


def test_a_refused_action_leaves_no_record(incident, users, api):
    ana = users("ana", "responder")
    assert (
        api(ana, "post", f"/api/v1/incidents/{incident.pk}/actions/", {"action": "acknowledge"}).status_code
        == 200
    )
    assert (
        api(ana, "post", f"/api/v1/incidents/{incident.pk}/actions/", {"action": "acknowledge"}).status_code
        == 409
    )
    assert len(records(incident)) == 1


def test_a_mitigation_names_its_field_and_the_acknowledge_it_implied(incident, users, api):
    ana = users("ana", "responder")
    assert (
        api(ana, "post", f"/api/v1/incidents/{incident.pk}/actions/", {"action": "mitigate"}).status_code
        == 200
    )
    [record] = records(incident)
    assert record.field == "mitigated_at" and record.old is None and record.new
    assert set(record.detail["changed"]) >= {"mitigated_at", "acknowledged_at", "status"}


def test_each_edited_matrix_cell_is_a_record_with_its_old_text(incident, users, client):
    lead = users("lead", "author")
    client.force_login(lead)
    url = f"/api/v1/incidents/{incident.pk}/matrix/"
    for text in ("first words", "better words"):
        answer = client.patch(
            url, json.dumps({"layer": "engine", "process_gap": text}), content_type="application/json"
        )
        assert answer.status_code == 200, answer.content
    edits = [r for r in records(incident) if r.action == "matrix_edit"]
    assert [(r.field, r.old, r.new) for r in edits][-1] == (
        "matrix.engine.process_gap",
        "first words",
        "better words",
    )
    assert all(r.via == "api" and r.by_name == "lead" for r in edits)


def test_a_new_integration_records_that_a_token_was_issued_but_not_the_token(db):
    integration, token = services.integration_add(kind="alertmanager", name="prod")
    [record] = AuditRecord.objects.for_object("integration", str(integration.pk))
    assert (record.via, record.field, record.new) == ("system", "token", "issued")
    assert token not in json.dumps([record.old, record.new, record.detail])


def test_the_audit_api_is_for_admins_and_filters_by_object_user_and_since(incident, users, api, client):
    ana, boss = users("ana", "responder"), users("boss", "admin")
    assert (
        api(ana, "post", f"/api/v1/incidents/{incident.pk}/actions/", {"action": "acknowledge"}).status_code
        == 200
    )
    services.integration_add(kind="grafana", name="other")
    assert api(ana, "get", "/api/v1/audit/").status_code == 403
    client.logout()
    assert client.get("/api/v1/audit/").status_code == 401
    everything = api(boss, "get", "/api/v1/audit/").json()
    assert everything["count"] == AuditRecord.objects.count()
    objects = [r["object"] for r in everything["results"]]
    assert f"incident:{incident.pk}" in objects and sum(o.startswith("integration:") for o in objects) >= 2
    mine = api(boss, "get", f"/api/v1/audit/?object=incident:{incident.pk}&user=ana").json()["results"]
    assert [(r["by"], r["via"], r["object"], r["field"]) for r in mine] == [
        ("ana", "api", f"incident:{incident.pk}", "acknowledged_at")
    ]
    assert api(boss, "get", "/api/v1/audit/?user=nobody").json()["count"] == 0
    assert api(boss, "get", "/api/v1/audit/?since=2999-01-01T00:00:00Z").json()["count"] == 0
    bad = api(boss, "get", "/api/v1/audit/?object=incident")
    assert bad.status_code == 400 and "object" in bad.json()["error"]
    assert api(boss, "get", "/api/v1/audit/?colour=red").status_code == 400
