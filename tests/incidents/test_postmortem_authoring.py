"""Authoring a postmortem: a person's section is never overwritten by fresh facts (it turns stale,
saying what changed), the machine's sections follow the facts; comments; the due policy on the
incident page, in the queue and on `/postmortems/`; the diff of two revisions."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from incidents.models import Alert, AuditRecord, Postmortem
from incidents.services.errors import RootlineError
from incidents.services.incidents import incident_resolve
from incidents.services.local_series import local_series_import
from incidents.services.postmortem_authoring import postmortem_comment_add, postmortem_refresh_facts
from incidents.services.postmortems import postmortem_act, postmortem_draft, postmortem_save
from tests.incidents.conftest import am_alert, am_body
from tests.incidents.test_postmortem_figures import ONSET, PLACE, POD, RESOLVED, history

pytestmark = pytest.mark.django_db


@pytest.fixture
def drafted(make_integration, deliver, users):
    integration = make_integration()
    start = ONSET.isoformat().replace("+00:00", "Z")
    deliver(
        integration, am_body(am_alert("LLMContainerOOMKilled", start, severity="critical", pod=POD, **PLACE))
    )
    incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    writer = users("writer", "responder")
    incident_resolve(incident=incident, user=writer, via=AuditRecord.Via.API, at=RESOLVED)
    incident.refresh_from_db()
    postmortem, _ = postmortem_draft(incident=incident, user=writer, via="api")
    return incident, postmortem, writer


def section(postmortem: Postmortem, key: str) -> dict:
    found = Postmortem.objects.get(pk=postmortem.pk).latest().section(key)
    assert found is not None
    return found


def test_fresh_facts_mark_an_edited_section_stale_and_refresh_the_machines(drafted, tmp_path):
    incident, postmortem, writer = drafted
    assert "not available" in section(postmortem, "impact")["markdown"]  # no metrics yet
    mine = "## Impact\n- Users saw errors for about an hour (our estimate)."
    postmortem_save(
        postmortem=postmortem,
        user=writer,
        via="api",
        body={"sections": [{"key": "impact", "markdown": mine}]},
    )
    untouched = section(postmortem, "summary")["markdown"]
    local_series_import(path=history(tmp_path))  # the metrics arrive: the figures change
    assert postmortem_refresh_facts(postmortem=postmortem) is True
    impact = section(postmortem, "impact")
    assert impact["markdown"] == mine and impact["stale"] is True  # kept as written, marked
    assert "user_impact" in impact["stale_facts"]
    assert "600 requests failed" in impact["stale_facts"]["user_impact"]["now"]
    assert "not available" in impact["stale_facts"]["user_impact"]["was"].lower()
    assert section(postmortem, "summary")["markdown"] == untouched  # its facts did not change
    assert Postmortem.objects.get(pk=postmortem.pk).latest().by is None  # the machine's revision
    assert postmortem_refresh_facts(postmortem=postmortem) is False  # nothing new: no revision
    # editing it again means its author saw the new facts: no longer stale
    postmortem_save(postmortem=postmortem, user=writer, via="api",
                    body={"sections": [{"key": "impact", "markdown": mine + " 600 failed."}]})  # fmt: skip
    assert section(postmortem, "impact")["stale"] is False
    assert postmortem_refresh_facts(postmortem=postmortem) is False


def test_regenerating_a_stale_section_replaces_it_with_the_fresh_draft(drafted, tmp_path, users):
    incident, postmortem, writer = drafted
    postmortem_save(postmortem=postmortem, user=writer, via="api",
                    body={"sections": [{"key": "impact", "markdown": "## Impact\nours"}]})  # fmt: skip
    local_series_import(path=history(tmp_path))
    postmortem_refresh_facts(postmortem=postmortem)
    postmortem_act(
        postmortem=postmortem, user=writer, via="api", body={"action": "regenerate", "section": "impact"}
    )
    impact = section(postmortem, "impact")
    assert (
        impact["stale"] is False
        and impact.get("edited_by") is None
        and "600 requests failed" in impact["markdown"]
    )


def test_a_published_postmortem_is_never_refreshed(drafted, tmp_path, users):
    incident, postmortem, writer = drafted
    lead = users("lead", "author")
    for action, who in (("submit", writer), ("approve", lead), ("publish", lead)):
        postmortem_act(postmortem=postmortem, user=who, via="api", body={"action": action})
    local_series_import(path=history(tmp_path))
    assert postmortem_refresh_facts(postmortem=postmortem) is False


def test_comments_belong_to_a_section(drafted):
    incident, postmortem, writer = drafted
    comment = postmortem_comment_add(
        postmortem=postmortem, user=writer, via="page", section="impact", text=" why 600? "
    )
    assert comment.text == "why 600?" and comment.section == "impact"
    with pytest.raises(RootlineError, match="no section 'nope'"):
        postmortem_comment_add(postmortem=postmortem, user=writer, via="page", section="nope", text="x")
    with pytest.raises(RootlineError, match="needs words"):
        postmortem_comment_add(postmortem=postmortem, user=writer, via="page", section="impact", text="  ")


def test_the_due_policy_shows_on_the_incident_page_the_queue_and_the_list(drafted, client, users):
    incident, postmortem, writer = drafted
    client.force_login(writer)
    days_left = (incident.resolved_at + timedelta(days=7) - timezone.now()).days
    words = f"postmortem due in {days_left} day{'s' if days_left != 1 else ''}"
    assert words in client.get(f"/incidents/{incident.pk}/").content.decode()
    assert words in client.get("/?status=resolved").content.decode()
    listed = client.get("/postmortems/").content.decode()
    assert words in listed and f"#{incident.pk}" in listed
    assert "No postmortem matches" in client.get("/postmortems/?overdue=1").content.decode()
    type(incident).objects.filter(pk=incident.pk).update(resolved_at=timezone.now() - timedelta(days=9))
    assert "postmortem overdue by 2 days" in client.get(f"/incidents/{incident.pk}/").content.decode()
    assert f"#{incident.pk}" in client.get("/postmortems/?overdue=1").content.decode()
    lead = users("lead", "author")
    for action, who in (("submit", writer), ("approve", lead), ("publish", lead)):
        postmortem_act(postmortem=postmortem, user=who, via="api", body={"action": action})
    assert "overdue" not in client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "published" in client.get("/postmortems/?status=published").content.decode().lower()


def test_the_diff_shows_only_what_changed(drafted, client):
    incident, postmortem, writer = drafted
    edit = {"sections": [{"key": "summary", "markdown": "# Report\n\n<b>ours</b>"}]}
    postmortem_save(postmortem=postmortem, user=writer, via="api", body=edit)
    client.force_login(writer)
    page = client.get(f"/incidents/{incident.pk}/postmortem/diff/?a=1&b=2").content.decode()
    assert page.count('class="card pm-diff changed"') == 1
    assert "&lt;b&gt;ours&lt;/b&gt;" in page and "<b>ours</b>" not in page
    assert client.get(f"/incidents/{incident.pk}/postmortem/diff/?a=1&b=99").status_code == 404
    saved = client.post(
        f"/incidents/{incident.pk}/postmortem/save/",
        json.dumps({"sections": [{"key": "timeline", "markdown": "## Timeline\nours"}]}),
        content_type="application/json",
    )
    assert saved.status_code == 200 and saved.json()["revision"] == 3
    bad = client.post(f"/incidents/{incident.pk}/postmortem/save/", "{", content_type="application/json")
    assert bad.status_code == 400
