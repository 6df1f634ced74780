"""Postmortems: drafted when a policy-severity incident resolves, the lifecycle and its revisions,
the Markdown export, a team's template, and what a sender or author writes staying inert."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from incidents.models import Alert, AuditRecord, Postmortem
from incidents.postmortems.template import load_template, sections_of
from incidents.services.incidents import incident_resolve
from incidents.services.postmortems import postmortem_draft
from tests.incidents.conftest import DAY, am_alert, am_body, cascade

pytestmark = pytest.mark.django_db


@pytest.fixture
def incident(make_integration, deliver):
    integration = make_integration()
    for alert in cascade():
        alert["labels"]["severity"] = "critical"
        deliver(integration, am_body(alert))
    return Alert.objects.get(alertname="LLMContainerOOMKilled").incident


def resolve(incident, user):
    incident_resolve(incident=incident, user=user, via=AuditRecord.Via.API)
    incident.refresh_from_db()


def test_a_critical_incident_resolved_gets_its_draft_and_a_warning_does_not(
    incident, make_integration, deliver, users, django_capture_on_commit_callbacks, settings
):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # no worker (the demo): drafted at once
    responder = users("r", "responder")
    with django_capture_on_commit_callbacks(execute=True):
        resolve(incident, responder)
    drafted = Postmortem.objects.get(incidents=incident)
    assert drafted.status == "draft" and drafted.latest().number == 1 and drafted.latest().by is None
    integration = make_integration()
    deliver(integration, am_body(am_alert("NodeDiskFilling", f"{DAY}T05:00:00Z", severity="warning",
                                          cluster="prod-us", node="cpu-node-3")))  # fmt: skip
    warning = Alert.objects.get(alertname="NodeDiskFilling", labels__cluster="prod-us").incident
    with django_capture_on_commit_callbacks(execute=True):
        resolve(warning, responder)
    assert not Postmortem.objects.filter(incidents=warning).exists()


def test_with_a_worker_the_draft_follows_the_evidence_collected_after_the_resolve(incident, users, settings):
    from incidents import tasks

    settings.CELERY_TASK_ALWAYS_EAGER = False
    resolve(incident, users("r", "responder"))  # queues the evidence collection, which drafts when done
    assert not Postmortem.objects.filter(incidents=incident).exists()
    tasks.draft_postmortems([incident.pk])  # what collect_evidence queues for a resolved incident
    assert Postmortem.objects.get(incidents=incident).status == "draft"
    tasks.draft_postmortems([incident.pk])  # run twice: still one
    assert Postmortem.objects.filter(incidents=incident).count() == 1


def test_the_draft_fills_every_section_of_the_template_and_leaves_no_blank(incident, users, api):
    answer = api(users("r", "responder"), "post", f"/api/v1/incidents/{incident.pk}/postmortem/")
    assert answer.status_code == 201
    body = answer.json()
    assert [s["key"] for s in body["sections"]] == [
        "summary", "impact", "root-cause", "remediation-tracking", "timeline", "evidence",
    ]  # fmt: skip
    text = "\n".join(s["markdown"] for s in body["sections"])
    assert "____" not in text and "{{" not in text
    assert "KVCacheFragmentationHigh" in body["sections"][2]["markdown"]  # the root, as the direct trigger
    assert {f["key"] for f in body["figures"]} >= {
        "affected_interfaces", "duration_s", "detect_s", "acknowledge_s", "mitigate_s", "resolve_s",
        "sli_recovery_s", "requests_failed", "requests_shed", "share_over_ttft_objective",
        "share_over_tpot_objective", "share_over_itl_objective", "tokens_not_served", "gpu_hours_lost",
    }  # fmt: skip
    again = api(users("r2", "responder"), "post", f"/api/v1/incidents/{incident.pk}/postmortem/")
    assert again.status_code == 200 and again.json()["id"] == body["id"]


def test_review_publish_and_reopen_with_every_revision_kept(incident, users, api, settings):
    writer, author = users("writer", "responder"), users("lead", "author")
    pm = api(writer, "post", f"/api/v1/incidents/{incident.pk}/postmortem/").json()
    url = f"/api/v1/postmortems/{pm['id']}/"
    edit = {"sections": [{"key": "summary", "markdown": "# Report\n\nWe ran out of KV blocks."}]}
    saved = api(writer, "patch", url, edit)
    assert saved.status_code == 200 and saved.json()["revision"] == 2
    assert saved.json()["sections"][0]["edited_by"] == "writer"
    markdown = api(writer, "get", f"/api/v1/incidents/{incident.pk}/postmortem.md")
    assert markdown["Content-Type"] == "text/markdown; charset=utf-8"
    assert markdown.content.decode().startswith("# Report\n\nWe ran out of KV blocks.")

    act = f"{url}actions/"
    assert api(writer, "post", act, {"action": "approve"}).status_code == 403  # a responder does not approve
    assert api(writer, "post", act, {"action": "submit"}).json()["status"] == "in_review"
    assert api(author, "post", act, {"action": "publish"}).status_code == 409  # not approved yet
    settings.POSTMORTEM_FOUR_EYES = True
    assert api(author, "post", act, {"action": "approve"}).json()["approved_by"] == "lead"
    published = api(author, "post", act, {"action": "publish"}).json()
    assert published["status"] == "published" and published["published_by"] == "lead"
    assert api(writer, "patch", url, edit).status_code == 409
    frozen = api(writer, "get", f"/api/v1/incidents/{incident.pk}/postmortem.md").content

    reopened = api(writer, "post", act, {"action": "reopen"}).json()
    assert reopened["status"] == "draft" and reopened["revision"] == 3
    api(writer, "patch", url, {"sections": [{"key": "summary", "markdown": "# Report\n\nDraft again."}]})
    # the Markdown export stays the published revision while a new draft is written
    assert api(writer, "get", f"/api/v1/incidents/{incident.pk}/postmortem.md").content == frozen
    revisions = api(writer, "get", f"{url}revisions/").json()
    assert [r["number"] for r in revisions] == [1, 2, 3, 4]
    assert [r["by"] for r in revisions] == [None, "writer", "writer", "writer"]
    assert [r["published"] for r in revisions] == [False, True, False, False]
    assert api(writer, "get", f"{url}revisions/2/").json()["sections"][0]["markdown"].endswith("KV blocks.")
    kinds = list(AuditRecord.objects.filter(object_kind="postmortem").values_list("action", flat=True))
    assert kinds == ["draft", "edit", "submit", "approve", "publish", "reopen", "edit"]


def test_four_eyes_refuses_approving_ones_own_submission(incident, users, api, settings):
    settings.POSTMORTEM_FOUR_EYES = True
    author = users("lead", "author")
    pm = api(author, "post", f"/api/v1/incidents/{incident.pk}/postmortem/").json()
    act = f"/api/v1/postmortems/{pm['id']}/actions/"
    api(author, "post", act, {"action": "submit"})
    refused = api(author, "post", act, {"action": "approve"})
    assert refused.status_code == 403 and "FOUR_EYES" in refused.json()["error"]
    settings.POSTMORTEM_FOUR_EYES = False
    assert api(author, "post", act, {"action": "approve"}).status_code == 200


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({"sections": [{"key": "nope", "markdown": "x"}]}, 400, "no section 'nope'"),
        ({"sections": []}, 400, "expected"),
        ({"sections": [{"key": "summary", "markdown": 3}]}, 400, "sections[0]"),
        ({"sections": [{"key": "summary", "markdown": "a\x00b"}]}, 400, "NUL"),
        ({"sections": [{"key": "summary", "markdown": "x"}], "status": "published"}, 400, "unknown field"),
        ([1, 2], 400, "expected"),
    ],
)
def test_a_bad_edit_is_refused_naming_the_field(incident, users, api, body, status, words):
    user = users("r", "responder")
    pm = api(user, "post", f"/api/v1/incidents/{incident.pk}/postmortem/").json()
    answer = api(user, "patch", f"/api/v1/postmortems/{pm['id']}/", body)
    assert answer.status_code == status and words in answer.json()["error"], answer.json()


def test_regenerate_redraws_one_section_and_attach_shares_the_postmortem(
    incident, users, api, make_integration, deliver
):
    user = users("r", "responder")
    pm = api(user, "post", f"/api/v1/incidents/{incident.pk}/postmortem/").json()
    url = f"/api/v1/postmortems/{pm['id']}/"
    edits = [{"key": "summary", "markdown": "mine"}, {"key": "timeline", "markdown": "old"}]
    api(user, "patch", url, {"sections": edits})
    redrawn = api(user, "post", f"{url}actions/", {"action": "regenerate", "section": "timeline"}).json()
    by_key = {s["key"]: s["markdown"] for s in redrawn["sections"]}
    assert by_key["summary"] == "mine\n" or by_key["summary"] == "mine"
    assert by_key["timeline"].startswith("## Timeline")
    integration = make_integration()
    deliver(
        integration, am_body(am_alert("NodeDiskFilling", f"{DAY}T05:00:00Z", cluster="prod-us", node="n3"))
    )
    other = Alert.objects.get(alertname="NodeDiskFilling", labels__cluster="prod-us").incident
    shared = api(user, "post", f"{url}actions/", {"action": "attach", "incident": other.pk}).json()
    assert shared["incidents"] == sorted([incident.pk, other.pk])
    assert (
        api(user, "get", f"/api/v1/postmortems/?incident={other.pk}").json()["results"][0]["id"] == pm["id"]
    )
    missing = api(user, "post", f"{url}actions/", {"action": "attach", "incident": 999999})
    assert missing.status_code == 404


def test_an_incident_with_a_postmortem_survives_recorrelation(incident, users):
    from incidents.services.correlation import correlation_rebuild

    postmortem, _ = postmortem_draft(incident=incident, user=None, via="system")
    Alert.objects.filter(incident=incident).update(correlated=False)
    correlation_rebuild(since=incident.started_at.replace(year=incident.started_at.year - 1))
    assert Postmortem.objects.get(pk=postmortem.pk).incidents.count() == 1


def test_a_team_template_names_its_own_sections_and_an_unknown_placeholder_stops_start_up(tmp_path):
    good = tmp_path / "ours.md"
    good.write_text("# {{ title }}\n\n## What happened\n{{ timeline }}\n\n## Why\n{{ direct_trigger }}\n")
    sections = load_template(str(good))
    assert [s.key for s in sections] == ["summary", "what-happened", "why"]
    bad = tmp_path / "bad.md"
    bad.write_text("# Report\n\n## Impact\nline\n{{ user_impcat }}\n")
    with pytest.raises(ImproperlyConfigured, match=r"line 5: unknown placeholder \{\{ user_impcat \}\}"):
        load_template(str(bad))
    assert [s.key for s in sections_of("## A\nx\n## A\ny\n")] == ["a", "a-2"]


def test_hostile_words_in_alerts_and_sections_stay_inert_on_the_page(
    make_integration, deliver, users, client
):
    integration = make_integration()
    hostile = '<img src=x onerror="alert(1)">'
    deliver(integration, am_body(am_alert(f"Bad{hostile}", f"{DAY}T05:00:00Z", severity="critical",
                                          cluster="prod-eu", pod="vllm-x-7d9f8b6c4-x2k9p",
                                          annotations={"summary": hostile})))  # fmt: skip
    incident = Alert.objects.get(labels__cluster="prod-eu").incident
    user = users("r", "responder")
    postmortem, _ = postmortem_draft(incident=incident, user=user, via="api")
    client.force_login(user)
    client.patch(
        f"/api/v1/postmortems/{postmortem.pk}/",
        json.dumps(
            {
                "sections": [
                    {"key": "summary", "markdown": "<script>alert(2)</script>[x](javascript:alert(3))"}
                ]
            }
        ),
        content_type="application/json",
    )
    page = client.get(f"/incidents/{incident.pk}/postmortem/").content.decode()
    printed = client.get(f"/incidents/{incident.pk}/postmortem/print/").content.decode()
    for html in (page, printed):
        elements = parsed(html)
        assert not [tag for tag, _ in elements if tag == "img"]
        assert not [attrs for _, attrs in elements if any(name.startswith("on") for name, _ in attrs)]
        assert not [attrs for _, attrs in elements if any("javascript:" in (v or "") for _, v in attrs)]
        scripts = [attrs for tag, attrs in elements if tag == "script"]
        assert all(
            dict(attrs).get("src") or dict(attrs).get("type") == "application/json" for attrs in scripts
        )


def parsed(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every element of the page as the browser's parser sees it: (tag, attributes)."""
    from html.parser import HTMLParser

    found: list[tuple[str, list[tuple[str, str | None]]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, attrs))

    Collect().feed(html)
    return found
