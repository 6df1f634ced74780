"""Who may do what, route by route: every URL pattern of the project and every incident action is
listed below with the least role that may use it, and each is tried as anonymous, viewer,
responder, author and admin. A route added without an entry fails
`test_every_route_has_an_entry`; an entry whose route behaves otherwise fails the walk.

`public`: anyone, signed in or not. `token`: the webhooks, which take their integration's token
and no session. Pages send the anonymous to the sign-in page; the API answers them 401."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, clear_url_caches, get_resolver

from incidents.action_bodies import SERVICES
from incidents.models import Incident
from incidents.services.postmortems import postmortem_draft
from incidents.services.remediation import remediation_create
from tests.incidents.conftest import am_body

pytestmark = pytest.mark.django_db

ROLES = ("viewer", "responder", "author", "admin")
EVERYONE = ("anonymous", *ROLES)
RANK = {role: rank for rank, role in enumerate(EVERYONE)}

# (route name, method) -> least role. Admin pages are one entry each for every pattern of the
# admin namespace: Django registers one per model and view.
ROUTES: dict[tuple[str, str], str] = {
    ("home", "GET"): "viewer",
    ("alerts", "GET"): "viewer",
    ("incident", "GET"): "viewer",
    ("incident-evidence", "GET"): "viewer",
    ("incident-act", "POST"): "responder",
    ("runbook", "GET"): "viewer",
    ("plotly-js", "GET"): "public",
    ("plotly-css", "GET"): "public",
    ("healthz", "GET"): "public",
    ("metrics", "GET"): "public",  # while ROOTLINE_METRICS_TOKEN is unset
    ("webhook", "POST"): "token",
    ("api-alerts", "GET"): "viewer",
    ("api-incidents", "GET"): "viewer",
    ("api-incident", "GET"): "viewer",
    ("api-incident-actions", "POST"): "responder",
    ("api-incident-timeline", "GET"): "viewer",
    ("api-incident-next", "GET"): "viewer",
    ("api-incident-matrix", "GET"): "viewer",
    ("api-incident-matrix", "PATCH"): "author",
    ("api-audit", "GET"): "admin",
    ("api-remediations", "GET"): "viewer",
    ("api-remediations", "POST"): "author",
    ("api-remediation", "GET"): "viewer",
    ("api-remediation", "PATCH"): "author",  # a responder only for the status of an item they own
    ("api-remediation-check", "POST"): "responder",
    ("remediations", "GET"): "viewer",
    ("remediation-act", "POST"): "responder",  # the form's services decide further
    ("api-incident-postmortem-md", "GET"): "viewer",
    ("api-incident-postmortem", "POST"): "responder",
    ("api-postmortems", "GET"): "viewer",
    ("api-postmortem", "GET"): "viewer",
    ("api-postmortem", "PATCH"): "responder",
    ("api-postmortem-revisions", "GET"): "viewer",
    ("api-postmortem-revision", "GET"): "viewer",
    ("api-postmortem-actions", "POST"): "responder",
    ("incident-postmortem", "GET"): "viewer",
    ("incident-postmortem-print", "GET"): "viewer",
    ("incident-postmortem-act", "POST"): "responder",
    ("incident-postmortem-save", "POST"): "responder",
    ("incident-postmortem-preview", "POST"): "viewer",
    ("incident-postmortem-diff", "GET"): "viewer",
    ("incident-postmortem-comment", "POST"): "responder",
    ("postmortems", "GET"): "viewer",
    ("review", "GET"): "viewer",
    ("api-review", "GET"): "viewer",
    ("api-review-md", "GET"): "viewer",
    ("api-review-csv", "GET"): "viewer",
    ("api-schema", "GET"): "viewer",
    ("api-no-such-route", "GET"): "public",  # a JSON 404 for a path no API route names
    ("profile", "GET"): "viewer",
    ("login", "GET"): "public",
    ("logout", "POST"): "public",
    ("password_change", "GET"): "viewer",
    ("password_change_done", "GET"): "viewer",
    ("password_reset", "GET"): "public",
    ("password_reset_done", "GET"): "public",
    ("password_reset_confirm", "GET"): "public",
    ("password_reset_complete", "GET"): "public",
    ("admin:*", "GET"): "admin",
}
# Every incident action, through the API and the page's forms alike.
ACTIONS: dict[str, str] = {
    "acknowledge": "responder",
    "assign": "responder",
    "note": "responder",
    "severity": "responder",
    "resolve": "responder",
    "reopen": "responder",
    "mitigate": "responder",
    "merge": "responder",
    "split": "responder",
    "exclude_alert": "responder",
    "false_positive": "responder",
    "degrade": "responder",
    "refresh_evidence": "responder",
}


def url_patterns(patterns=None, prefix: str = "", namespace: str | None = None):
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            yield from url_patterns(
                pattern.url_patterns, prefix + str(pattern.pattern), pattern.namespace or namespace
            )
        elif isinstance(pattern, URLPattern):
            yield namespace, pattern.name, prefix + str(pattern.pattern)


def entry_name(namespace: str | None, name: str | None, route: str) -> str:
    if namespace == "admin":
        return "admin:*"
    return name or route


def test_every_route_has_an_entry():
    listed = {name for name, _ in ROUTES}
    missing = sorted(
        {entry_name(*pattern) for pattern in url_patterns()} - listed,
    )
    assert not missing, f"routes without a role entry in {__name__}.ROUTES: {missing}"
    assert listed <= {entry_name(*pattern) for pattern in url_patterns()}, "entries naming no route"


def test_every_incident_action_has_an_entry():
    assert set(ACTIONS) == set(SERVICES)


def test_an_unlisted_route_is_caught(monkeypatch):
    """The walk sees a route added to the URLconf (here a fake one) and the check names it."""
    from django.urls import path

    from rootline import urls

    monkeypatch.setattr(urls, "urlpatterns", [*urls.urlpatterns, path("new/", lambda r: None, name="new")])
    clear_url_caches()
    try:
        with pytest.raises(AssertionError, match="'new'"):
            test_every_route_has_an_entry()
    finally:
        monkeypatch.undo()
        clear_url_caches()


@pytest.fixture
def people(db) -> dict[str, Client]:
    from django.contrib.auth.models import Group

    clients = {"anonymous": Client()}
    for role in ROLES:
        user = User.objects.create_user(f"{role}-person", password="pw")
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        clients[role] = Client()
        clients[role].force_login(user)
    return clients


def requests_for(incident: Incident, integration_id: int) -> dict[tuple[str, str], tuple[str, dict]]:
    """One request per entry: (path, keyword arguments of the test client's method)."""
    alert = incident.alerts.first()
    assert alert is not None
    json_body = {"content_type": "application/json"}
    postmortem, _ = postmortem_draft(incident=incident, user=None, via="system")
    item = remediation_create(incident=incident, user=None, via="system", body={"title": "x", "check": "up"})
    edit = {"sections": [{"key": postmortem.latest().sections[0]["key"], "markdown": "x"}]}
    return {
        ("api-remediations", "GET"): ("/api/v1/remediations/", {}),
        ("api-remediations", "POST"): (
            "/api/v1/remediations/",
            {"data": json.dumps({"incident": incident.pk, "title": "t"}), **json_body},
        ),
        ("api-remediation", "GET"): (f"/api/v1/remediations/{item.pk}/", {}),
        ("api-remediation", "PATCH"): (
            f"/api/v1/remediations/{item.pk}/",
            {"data": json.dumps({"verification": "v"}), **json_body},
        ),
        ("api-remediation-check", "POST"): (f"/api/v1/remediations/{item.pk}/check/", json_body),
        ("remediations", "GET"): ("/remediations/", {}),
        ("review", "GET"): ("/review/?week=2026-W47", {}),
        ("api-review", "GET"): ("/api/v1/review/?week=2026-W47", {}),
        ("api-review-md", "GET"): ("/api/v1/review.md?week=2026-W47", {}),
        ("api-review-csv", "GET"): ("/api/v1/review.csv?week=2026-W47&table=noisy_rules", {}),
        ("remediation-act", "POST"): (f"/remediations/{item.pk}/act/", {"data": {"action": "check"}}),
        ("api-incident-postmortem-md", "GET"): (f"/api/v1/incidents/{incident.pk}/postmortem.md", {}),
        ("api-incident-postmortem", "POST"): (f"/api/v1/incidents/{incident.pk}/postmortem/", json_body),
        ("api-postmortems", "GET"): ("/api/v1/postmortems/", {}),
        ("api-postmortem", "GET"): (f"/api/v1/postmortems/{postmortem.pk}/", {}),
        ("api-postmortem", "PATCH"): (
            f"/api/v1/postmortems/{postmortem.pk}/",
            {"data": json.dumps(edit), **json_body},
        ),
        ("api-postmortem-revisions", "GET"): (f"/api/v1/postmortems/{postmortem.pk}/revisions/", {}),
        ("api-postmortem-revision", "GET"): (f"/api/v1/postmortems/{postmortem.pk}/revisions/1/", {}),
        ("api-postmortem-actions", "POST"): (
            f"/api/v1/postmortems/{postmortem.pk}/actions/",
            {"data": json.dumps({"action": "regenerate", "section": "timeline"}), **json_body},
        ),
        ("incident-postmortem", "GET"): (f"/incidents/{incident.pk}/postmortem/", {}),
        ("incident-postmortem-print", "GET"): (f"/incidents/{incident.pk}/postmortem/print/", {}),
        ("incident-postmortem-act", "POST"): (
            f"/incidents/{incident.pk}/postmortem/act/",
            {"data": {"action": "submit"}},
        ),
        ("incident-postmortem-save", "POST"): (
            f"/incidents/{incident.pk}/postmortem/save/",
            {"data": json.dumps(edit), **json_body},
        ),
        ("incident-postmortem-preview", "POST"): (
            f"/incidents/{incident.pk}/postmortem/preview/",
            {"data": {"markdown": "# x"}},
        ),
        ("incident-postmortem-diff", "GET"): (f"/incidents/{incident.pk}/postmortem/diff/", {}),
        ("incident-postmortem-comment", "POST"): (
            f"/incidents/{incident.pk}/postmortem/comment/",
            {"data": {"section": "summary", "text": "x"}},
        ),
        ("postmortems", "GET"): ("/postmortems/", {}),
        ("home", "GET"): ("/", {}),
        ("alerts", "GET"): ("/alerts/", {}),
        ("incident", "GET"): (f"/incidents/{incident.pk}/", {}),
        ("incident-evidence", "GET"): (f"/incidents/{incident.pk}/evidence/", {}),
        ("incident-act", "POST"): (
            f"/incidents/{incident.pk}/act/",
            {"data": {"action": "note", "text": "x"}},
        ),
        ("runbook", "GET"): ("/runbooks/LLMKVFragmentationHigh/", {}),
        ("plotly-js", "GET"): ("/assets/plotly-0.min.js", {}),
        ("plotly-css", "GET"): ("/assets/plotly-0.css", {}),
        ("healthz", "GET"): ("/healthz", {}),
        ("metrics", "GET"): ("/metrics", {}),
        ("webhook", "POST"): (
            f"/hooks/alertmanager/{integration_id}/",
            {"data": am_body(), **json_body},
        ),
        ("api-alerts", "GET"): ("/api/v1/alerts/", {}),
        ("api-incidents", "GET"): ("/api/v1/incidents/", {}),
        ("api-incident", "GET"): (f"/api/v1/incidents/{incident.pk}/", {}),
        ("api-incident-actions", "POST"): (
            f"/api/v1/incidents/{incident.pk}/actions/",
            {"data": json.dumps({"action": "note", "text": "x"}), **json_body},
        ),
        ("api-incident-timeline", "GET"): (f"/api/v1/incidents/{incident.pk}/timeline/", {}),
        ("api-incident-next", "GET"): (f"/api/v1/incidents/{incident.pk}/next/", {}),
        ("api-incident-matrix", "GET"): (f"/api/v1/incidents/{incident.pk}/matrix/", {}),
        ("api-incident-matrix", "PATCH"): (
            f"/api/v1/incidents/{incident.pk}/matrix/",
            {"data": json.dumps({"layer": "engine", "process_gap": "x"}), **json_body},
        ),
        ("api-audit", "GET"): ("/api/v1/audit/", {}),
        ("api-schema", "GET"): ("/api/v1/schema/", {}),
        ("api-no-such-route", "GET"): ("/api/v1/nope/", {}),
        ("profile", "GET"): ("/accounts/profile/", {}),
        ("login", "GET"): ("/accounts/login/", {}),
        ("logout", "POST"): ("/accounts/logout/", {}),
        ("password_change", "GET"): ("/accounts/password_change/", {}),
        ("password_change_done", "GET"): ("/accounts/password_change/done/", {}),
        ("password_reset", "GET"): ("/accounts/password_reset/", {}),
        ("password_reset_done", "GET"): ("/accounts/password_reset/done/", {}),
        ("password_reset_confirm", "GET"): ("/accounts/reset/MQ/set-password/", {}),
        ("password_reset_complete", "GET"): ("/accounts/reset/done/", {}),
        ("admin:*", "GET"): ("/admin/incidents/auditrecord/", {}),
    }


def refused(response, who: str) -> bool:
    """A refusal is a 401 or 403, a redirect to a sign-in page, or (the page's forms) the
    service's refusal shown as a message on the redirect back."""
    if response.status_code in (401, 403):
        return True
    if response.status_code == 302:
        where = response.headers["Location"]
        if where.startswith(("/accounts/login/", "/admin/login/")):
            return True
        shown = [str(message) for message in getattr(response.wsgi_request, "_messages", [])]
        return any("needs the" in text and "role" in text for text in shown)
    return False


def allowed_for(least: str, who: str) -> bool:
    if least == "public":
        return True
    if least == "token":
        return False  # no session opens a webhook: it takes its integration's token
    return RANK[who] >= RANK[least]


def test_each_route_allows_exactly_the_roles_its_entry_names(incident, people, make_integration):
    integration = make_integration()
    plan = requests_for(incident, integration.pk)
    assert set(plan) == set(ROUTES)
    wrong = []
    for (name, method), least in ROUTES.items():
        path, kwargs = plan[(name, method)]
        for who in EVERYONE:
            response = getattr(people[who], method.lower())(path, **kwargs)
            assert response.status_code != 500, (name, who)
            if name == "logout":  # its success is the redirect to the sign-in page, for anyone
                if who != "anonymous":
                    people[who].force_login(User.objects.get(username=f"{who}-person"))
                if response.status_code != 302:
                    wrong.append(f"{method} {name} as {who}: {response.status_code}")
                continue
            if refused(response, who) == allowed_for(least, who):
                wrong.append(f"{method} {name} as {who}: {response.status_code}")
    assert not wrong, wrong


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_each_incident_action_is_refused_below_its_role_on_the_api_and_the_page(action, incident, people):
    body = {"action": action}
    for who in EVERYONE:
        api = people[who].post(
            f"/api/v1/incidents/{incident.pk}/actions/", json.dumps(body), content_type="application/json"
        )
        page = people[who].post(f"/incidents/{incident.pk}/act/", body)
        for response in (api, page):
            assert response.status_code != 500
            # Allowed: not refused for the role (the body may still be a 400 or a 409).
            assert refused(response, who) != allowed_for(ACTIONS[action], who), (
                action,
                who,
                response.status_code,
            )
