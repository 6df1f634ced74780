"""Remediation items through the API and the services: horizons and due times, roles, history,
suggestions, reminders once per state (mail.outbox, time moved), the signed outbound webhook
(a local receiver), and a recurring chain linking the earlier incident's items."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from incidents.models import Incident, RemediationItem
from incidents.services.remediation import remediation_create, remediation_note_recurrence, remediation_remind
from tests.conftest import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def incident():
    return Incident.objects.create(
        title="frag",
        started_at=timezone.now() - timedelta(hours=3),
        severity="critical",
        scope={"deployment": "vllm-llama"},
        chain_signature="engine:kv_fragmentation>platform:oom",
    )


def test_horizons_set_the_due_time_and_roles_decide_who_changes_what(incident, users, api):
    lead, oncall, other, viewer = (
        users("lead", "author"),
        users("oncall", "responder"),
        users("o2", "responder"),
        users("v", "viewer"),
    )
    made = {}
    for horizon, days in (("24h", 1), ("1w", 7), ("1m", 30)):
        answer = api(
            lead,
            "post",
            "/api/v1/remediations/",
            {"incident": incident.pk, "title": f"fix {horizon}", "horizon": horizon, "owner": "oncall"},
        )
        assert answer.status_code == 201, answer.json()
        body = answer.json()
        made[horizon] = body
        due = timezone.datetime.fromisoformat(body["due_at"].replace("Z", "+00:00"))
        assert abs((due - timezone.now()) - timedelta(days=days)) < timedelta(minutes=1)
        assert body["status"] == "open" and body["overdue"] is False and body["owner"] == "oncall"
    past = api(
        lead,
        "post",
        "/api/v1/remediations/",
        {"incident": incident.pk, "title": "late", "horizon": "date", "due_at": "2020-01-01T00:00:00Z"},
    ).json()
    assert past["overdue"] is True
    assert (
        api(
            lead, "post", "/api/v1/remediations/", {"incident": incident.pk, "title": "x", "horizon": "date"}
        ).status_code
        == 400
    )
    assert (
        api(oncall, "post", "/api/v1/remediations/", {"incident": incident.pk, "title": "x"}).status_code
        == 403
    )
    item = f"/api/v1/remediations/{made['1w']['id']}/"
    assert api(oncall, "patch", item, {"status": "in_progress"}).status_code == 200  # owner moves status
    assert api(oncall, "patch", item, {"title": "renamed"}).status_code == 403  # but does not edit
    assert api(other, "patch", item, {"status": "done"}).status_code == 403  # not theirs
    assert api(viewer, "patch", item, {"status": "done"}).status_code == 403
    assert api(lead, "patch", item, {"status": "verified"}).status_code == 400  # the check sets it
    done = api(oncall, "patch", item, {"status": "done"}).json()
    assert done["done_at"] and done["overdue"] is False
    fields = [(h["field"], h["by"]) for h in done["history"]]
    assert ("status", "oncall") in fields and ("done_at", "oncall") in fields
    assert [
        r["id"]
        for r in api(viewer, "get", "/api/v1/remediations/?owner=oncall&status=done").json()["results"]
    ] == [done["id"]]
    assert [r["id"] for r in api(viewer, "get", "/api/v1/remediations/?overdue=true").json()["results"]] == [
        past["id"]
    ]
    assert api(viewer, "get", "/api/v1/remediations/?status=bogus").status_code == 400


def test_suggestions_are_accepted_or_rejected_and_never_reminded(incident, users, api):
    lead = users("lead", "author")
    lead.email = "lead@example.com"
    lead.save()
    suggestion = remediation_create(
        incident=incident,
        user=None,
        via="system",
        suggested=True,
        body={
            "title": "add a defragmenter",
            "horizon": "date",
            "owner": "lead",
            "due_at": "2020-01-01T00:00:00Z",
        },
        source={"layer": "engine"},
    )
    assert api(lead, "get", "/api/v1/remediations/").json()["results"] == []
    listed = api(lead, "get", "/api/v1/remediations/?suggested=true").json()["results"]
    assert [r["id"] for r in listed] == [suggestion.pk] and listed[0]["overdue"] is False
    assert remediation_remind() == [] and mail.outbox == []
    accepted = api(lead, "patch", f"/api/v1/remediations/{suggestion.pk}/", {"suggested": False}).json()
    assert accepted["suggested"] is False and accepted["overdue"] is True
    other = remediation_create(
        incident=incident, user=None, via="system", suggested=True, body={"title": "drills"}
    )
    rejected = api(lead, "patch", f"/api/v1/remediations/{other.pk}/", {"status": "wont_do"}).json()
    assert rejected["status"] == "wont_do" and rejected["suggested"] is False


def test_owners_hear_once_per_state_change(incident, users):
    owner = users("oncall", "responder")
    owner.email = "oncall@example.com"
    owner.save()
    now = timezone.now()
    item = remediation_create(
        incident=incident,
        user=None,
        via="system",
        body={
            "title": "roll back the threshold",
            "owner": "oncall",
            "horizon": "date",
            "due_at": (now + timedelta(hours=30)).isoformat(),
        },
    )
    assert remediation_remind(now=now) == []  # more than a day left
    assert remediation_remind(now=now + timedelta(hours=8)) == [item.pk]
    assert "due" in mail.outbox[-1].subject and mail.outbox[-1].to == ["oncall@example.com"]
    assert remediation_remind(now=now + timedelta(hours=9)) == []  # told already
    assert remediation_remind(now=now + timedelta(hours=31)) == [item.pk]  # now overdue
    assert "overdue" in mail.outbox[-1].subject
    assert remediation_remind(now=now + timedelta(hours=40)) == [] and len(mail.outbox) == 2
    RemediationItem.objects.filter(pk=item.pk).update(due_at=now + timedelta(hours=50))  # a new deadline
    assert remediation_remind(now=now + timedelta(hours=41)) == [item.pk] and len(mail.outbox) == 3


def test_the_webhook_is_signed_and_received(incident, users, settings, django_capture_on_commit_callbacks):
    received = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((dict(self.headers), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", free_port()), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.REMEDIATION_WEBHOOK_URL = f"http://127.0.0.1:{server.server_port}/hook"
    settings.REMEDIATION_WEBHOOK_SECRET = "s3cret"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            remediation_create(
                incident=incident, user=users("lead", "author"), via="api", body={"title": "drills"}
            )
    finally:
        server.shutdown()
    [(headers, body)] = received
    expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Rootline-Signature"] == expected and headers["X-Rootline-Event"] == "created"
    assert json.loads(body)["item"]["title"] == "drills"


def test_a_recurring_chain_on_the_same_deployment_links_the_earlier_items(incident, users):
    lead = users("lead", "author")
    item = remediation_create(
        incident=incident, user=lead, via="api", body={"title": "dynamic block allocation"}
    )
    again = Incident.objects.create(
        title="frag again",
        started_at=timezone.now(),
        severity="critical",
        scope={"deployment": "vllm-llama"},
        chain_signature=incident.chain_signature,
    )
    elsewhere = Incident.objects.create(
        title="frag elsewhere",
        started_at=timezone.now(),
        severity="critical",
        scope={"deployment": "sglang-qwen"},
        chain_signature=incident.chain_signature,
    )
    assert remediation_note_recurrence(incident=elsewhere) == []
    assert remediation_note_recurrence(incident=again) == [item.pk]
    assert RemediationItem.objects.get(pk=item.pk).recurred == [again.pk]
    assert remediation_note_recurrence(incident=again) == []  # noted once


def test_accepted_items_fill_the_drafts_remediation_table_and_a_published_one_keeps_its_own(users):
    from incidents.models import Postmortem
    from incidents.services.postmortems import postmortem_act, postmortem_draft
    from incidents.services.remediation import remediation_update

    lead = users("lead", "author")
    incident = Incident.objects.create(
        title="frag", started_at=timezone.now() - timedelta(hours=2), severity="critical"
    )
    postmortem, _ = postmortem_draft(incident=incident, user=lead, via="api")

    def table() -> str:
        return Postmortem.objects.get(pk=postmortem.pk).latest().section("remediation-tracking")["markdown"]

    assert "No remediation item yet" in table()
    suggestion = remediation_create(
        incident=incident,
        user=None,
        via="system",
        suggested=True,
        body={"title": "Add a memory defragmenter", "horizon": "1m"},
    )
    assert "defragmenter" not in table()  # a suggestion is not a promise
    remediation_update(item=suggestion, user=lead, via="api", body={"suggested": False, "owner": "lead"})
    assert "| Add a memory defragmenter | lead |" in table()
    for action in ("submit", "approve", "publish"):
        postmortem_act(postmortem=postmortem, user=lead, via="api", body={"action": action})
    published = Postmortem.objects.get(pk=postmortem.pk).latest().section("remediation-tracking")["markdown"]
    remediation_create(incident=incident, user=lead, via="api", body={"title": "Regular failure drills"})
    after = (
        Postmortem.objects.get(pk=postmortem.pk)
        .latest_published()
        .section("remediation-tracking")["markdown"]
    )
    assert after == published and "drills" not in after  # the published revision keeps its table


def test_a_tracker_sends_status_back_with_a_token_and_its_user_is_recorded(incident, users):
    from django.test import Client

    from incidents.services.api_tokens import api_token_issue

    bot = users("tracker-bot", "responder")
    item = remediation_create(
        incident=incident,
        user=None,
        via="system",
        body={"title": "dynamic block allocation", "owner": "tracker-bot"},
    )
    token = api_token_issue(username=bot.get_username())
    answer = Client().patch(
        f"/api/v1/remediations/{item.pk}/",
        json.dumps({"status": "done"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert answer.status_code == 200, answer.content
    assert ("status", "tracker-bot", "done") in [
        (h["field"], h["by"], h["new"]) for h in answer.json()["history"]
    ]
