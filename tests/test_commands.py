"""Management commands of the contract: integration add, api_token, import_alerts."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from incidents.models import Alert, Delivery, Integration


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_integration_add_prints_one_json_line_with_a_working_url_and_token(client):
    output = run("integration", "add", "--kind", "alertmanager", "--name", "prod-am", "--rate-limit", "50")
    [line] = output.strip().splitlines()
    created = json.loads(line)
    assert set(created) == {"id", "kind", "name", "url", "token"}
    integration = Integration.objects.get(pk=created["id"])
    assert integration.rate_limit == 50 and integration.token_matches(created["token"])
    response = client.post(
        created["url"],
        b'{"alerts": []}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {created['token']}",
    )
    assert response.status_code == 202 and response.json()["accepted"] == 0


@pytest.mark.django_db
def test_integration_add_refuses_a_duplicate_name_and_a_bad_kind():
    run("integration", "add", "--kind", "events", "--name", "pd", "--token", "t1")
    with pytest.raises(CommandError, match="exists already"):
        run("integration", "add", "--kind", "events", "--name", "pd")
    with pytest.raises(CommandError):
        run("integration", "add", "--kind", "nagios", "--name", "x")


@pytest.mark.django_db
def test_api_token_create_user_makes_a_responder_and_prints_the_bare_token_last(client):
    token = run("api_token", "oncall", "--create-user").strip().splitlines()[-1]
    user = User.objects.get(username="oncall")
    assert list(user.groups.values_list("name", flat=True)) == ["responder"]
    assert client.get("/api/v1/alerts/", HTTP_AUTHORIZATION=f"Token {token}").status_code == 200
    second = run("api_token", "oncall").strip().splitlines()[-1]
    assert second != token  # minted anew: the first is not stored to be printed again
    for each in (token, second):
        assert client.get("/api/v1/alerts/", HTTP_AUTHORIZATION=f"Token {each}").status_code == 200
    with pytest.raises(CommandError, match="--create-user"):
        run("api_token", "nobody")


@pytest.mark.django_db
def test_import_alerts_replays_bodies_and_a_second_run_changes_nothing(
    tmp_path, make_integration, django_capture_on_commit_callbacks
):
    from incidents.tasks import process_delivery

    integration = make_integration()
    lines = [
        json.dumps(
            {
                "version": "4",
                "alerts": [
                    {
                        "labels": {"alertname": f"A{n}", "pod": "p"},
                        "startsAt": "2026-11-29T01:00:00Z",
                        "status": "firing",
                    }
                ],
            }
        )
        for n in range(3)
    ]
    lines.append("{broken")
    path = tmp_path / "alerts.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        totals = json.loads(run("import_alerts", str(path), "--integration", str(integration.pk)).strip())
    assert totals == {"bodies": 4, "accepted": 3, "rejected": 0, "refused": 1}
    assert len(callbacks) == 3  # one enqueue per stored body; run the task as the worker would
    for delivery in Delivery.objects.filter(status="pending"):
        process_delivery(delivery.pk)
    assert Alert.objects.count() == 3
    again = json.loads(run("import_alerts", str(path), "--integration", str(integration.pk)).strip())
    assert again["accepted"] == 3 and Alert.objects.count() == 3 and Delivery.objects.count() == 4


@pytest.mark.django_db
def test_demo_loads_incidents_and_prints_a_login_that_works_where_the_server_will_be(client):
    output = run("demo", "--url", "http://127.0.0.1:8765/")
    from incidents.models import Incident

    assert Incident.objects.count() > 1
    line = next(line for line in output.splitlines() if line.startswith("Admin login:"))
    username, password = line.split(": ", 1)[1].split("  ")[0].split(" / ")
    assert line.endswith("(http://127.0.0.1:8765/accounts/login/)")
    signed_in = client.post("/accounts/login/", {"username": username, "password": password})
    assert signed_in.status_code == 302 and "_auth_user_id" in client.session
